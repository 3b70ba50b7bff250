import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { LocalRunner } from '../../src/host/local-runner.js';
import { EngineExec } from '../../src/sandbox/docker/engine-exec.js';
import { encodeChannelCommand } from '../../src/sandbox/exec-channel/channel-command.js';
import { ChannelStartError, ExecChannel } from '../../src/sandbox/exec-channel/exec-channel.js';
import { nativeAgentBinary } from '../../src/sandbox/exec-channel/native-agent.js';
import type { ChannelHost, ChannelProcess } from '../../src/sandbox/exec-channel/types.js';

const run = promisify(execFile);
const engine = EngineExec.local();
const skip = (!engine && 'no local Docker Engine') || (!nativeAgentBinary() && 'the native agent was not built');

/** A fresh container for one describe block; removed afterwards. */
async function startContainer(image: string, extra: string[] = []): Promise<string> {
  const { stdout } = await run('docker', ['run', '-d', '--rm', '--init', '--label', 'ct.test=exec-channel-direct', ...extra, image, 'sleep', '100000']);
  return stdout.trim();
}

/** A channel host on the local engine, as a sandbox makes it; `start` may stand in for the engine's exec. */
function channelHost(container: string, start: (cmd: string[], user: string | undefined) => Promise<ChannelProcess> = (cmd, user) => engine!.start(container, cmd, user)): ChannelHost {
  return { runner: new LocalRunner(), docker: 'docker', containerId: container, kill: async () => {}, startExec: start };
}

/** Runs `echo` on the channel and checks the answer. */
async function echoes(ch: ExecChannel): Promise<void> {
  const r = await ch.run(encodeChannelCommand(['echo', 'fine'], {})!, { maxOutput: 1000 });
  assert.equal(r.kind === 'done' && r.stdout.toString(), 'fine\n');
}

/** What is left in the native agents' directories in a container. */
async function agentDirs(container: string): Promise<string> {
  return (await run('docker', ['exec', container, 'sh', '-c', 'ls -A /tmp/ct-agent.*/'])).stdout;
}

const token = () => randomBytes(16).toString('hex');

/** A unix socket server at `path`, created as ct creates it (connectable by the agent's user). */
function listenAt(path: string): Server {
  const server = createServer();
  const umask = process.umask(0o111);
  try {
    server.listen(path);
  } finally {
    process.umask(umask);
  }
  return server;
}

describe('exec channel direct transport: the host never connects to a path the container names', { skip }, () => {
  let container: string;
  before(async () => {
    container = await startContainer('debian:bookworm-slim', ['--workdir', '/srv']);
  });
  after(async () => {
    if (container) await run('docker', ['rm', '--force', container]).catch(() => {});
  });

  test('an agent that answers the direct offer with a symlink to a socket on the host: the host never connects to it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ct-direct-'));
    const target = join(dir, 'host.sock');
    const peers: Socket[] = [];
    const server = createServer((s) => {
      peers.push(s);
      s.destroy();
    });
    await new Promise<void>((resolve) => server.listen(target, resolve));
    // A fake agent: the native hello offering a direct socket, then, to the host's D request, a
    // path inside the container that is a symlink to the host's socket (absolute: resolved
    // against the root of whoever follows it). It keeps the request it was sent.
    const fake = [
      'head -c "$2" >/dev/null',
      'ln -s "$1" /tmp/ct-evil-$$',
      'echo "H 1 $$ setsid stream native direct" >&2',
      'read -r offer',
      'printf "%s\\n" "$offer" > /tmp/ct-offer',
      'echo "D /tmp/ct-evil-$$" >&2',
      'exec cat >/dev/null',
    ].join('\n');
    // The channel's command is `sh -c BOOT sh stream <binary size> <drain ms>`: the fake runs in
    // its place, reading the binary's bytes off stdin first.
    const host = channelHost(container, (cmd, user) => engine!.start(container, ['sh', '-c', fake, 'sh', target, cmd[5] ?? '0'], user));
    let ch: ExecChannel | undefined;
    try {
      ch = await ExecChannel.start(host, undefined).catch((e: unknown) => {
        // A path for an answer is a protocol error: the channel is not used at all.
        assert.ok(e instanceof ChannelStartError, String(e));
        assert.match(e.message, /protocol error/);
        return undefined;
      });
      assert.equal(peers.length, 0, 'nothing connected to the host\'s socket');
      if (ch) assert.equal(ch.transport, 'stream');
      // The socket the host offered (the last word of its request) is gone from the agent's cwd.
      const offer = (await run('docker', ['exec', container, 'cat', '/tmp/ct-offer'])).stdout.trim().split(' ');
      assert.equal(offer.length, 4, `the host's request: ${offer.join(' ')}`);
      const left = await run('docker', ['exec', container, 'sh', '-c', 'ls -A /srv | grep -c -F -x -- "$1" || true', 'sh', offer[3]!]);
      assert.equal(left.stdout.trim(), '0');
    } finally {
      ch?.close();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const user of [undefined, 'nobody']) {
    test(`the native agent connects to the host's socket and the channel goes direct (as ${user ?? 'the image\'s user'})`, async () => {
      const ch = await ExecChannel.start(channelHost(container), user);
      try {
        assert.equal(ch.agent, 'native');
        assert.equal(ch.transport, 'direct');
        await echoes(ch);
        // Commands without a cwd start where docker exec starts them, not in the agent's directory.
        const cmd = encodeChannelCommand(['sh', '-c', 'pwd; echo "$PWD"; ls -A "/proc/$PPID/cwd/"'], {})!;
        const r = await ch.run(cmd, { maxOutput: 1000 });
        assert.equal(r.kind === 'done' && r.stdout.toString(), '/srv\n/srv\nct-exec-agent\n', 'the host\'s socket is gone from the agent\'s directory');
      } finally {
        ch.close();
      }
    });
  }

  test('a process inside the container that connects to the host\'s socket before the agent hears nothing; the channel stays on its streams', async () => {
    // It finds the socket by listing the agents' directories (it runs as root, as the agent).
    const script = [
      'use IO::Socket::UNIX; $| = 1;',
      'my ($p) = grep { -S } glob("/tmp/ct-agent.*/ct-*");',
      'my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $p) or die "connect: $!";',
      'print "connected\\n";',
      'my $got = ""; while (sysread($s, my $b, 4096)) { $got .= $b }',
      'print "heard [$got]\\n";',
    ].join('\n');
    let inside: ReturnType<typeof spawn> | undefined;
    let insideOut = '';
    // Holds the host's D request until the intruder has connected and the host has taken it.
    const start = async (cmd: string[], user: string | undefined): Promise<ChannelProcess> => {
      const proc = await engine!.start(container, cmd, user);
      const intrude = async (name: string) => {
        const pid = await proc.hostPid!();
        inside = spawn('docker', ['exec', container, 'perl', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
        inside.stdout!.on('data', (c: Buffer) => (insideOut += c.toString()));
        const deadline = Date.now() + 10_000;
        while (!insideOut.includes('connected\n') || existsSync(`/proc/${pid}/cwd/${name}`)) {
          if (Date.now() > deadline) throw new Error(`the intruder did not get in: ${insideOut}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      const stdin = new Writable({
        write(chunk: Buffer, _enc, done) {
          const line = chunk.toString('latin1');
          const held = line.startsWith('D ') ? intrude(line.trim().split(' ')[3]!) : Promise.resolve();
          void held.then(
            () => proc.stdin.write(chunk, () => done()),
            (e: Error) => done(e),
          );
        },
        final(done) {
          proc.stdin.end();
          done();
        },
      });
      return { ...proc, stdin };
    };
    const ch = await ExecChannel.start(channelHost(container, start), undefined);
    try {
      assert.ok(inside, 'the host made its offer');
      assert.equal(ch.agent, 'native');
      assert.equal(ch.transport, 'stream');
      await echoes(ch);
      const code = await new Promise((r) => (inside!.exitCode !== null ? r(inside!.exitCode) : inside!.on('exit', r)));
      assert.equal(code, 0);
      assert.equal(insideOut, 'connected\nheard []\n');
      assert.equal(await agentDirs(container), 'ct-exec-agent\n');
    } finally {
      ch.close();
      inside?.kill();
    }
  });

  test('a channel whose socket cannot be made stays on its streams, at once', async () => {
    const started = Date.now();
    // The exec's pid as a Docker Engine in a VM would give it: no such process here.
    const ch = await ExecChannel.start(channelHost(container, async (cmd, user) => ({ ...(await engine!.start(container, cmd, user)), hostPid: async () => 999_999_999 })), undefined);
    try {
      assert.ok(Date.now() - started < 1_500, `started in ${Date.now() - started} ms`);
      assert.equal(ch.agent, 'native');
      assert.equal(ch.transport, 'stream');
      await echoes(ch);
    } finally {
      ch.close();
    }
  });
});

/**
 * The native agent's side of the direct socket, driven by hand: the agent started through the
 * Engine API as a channel starts it, the test in the host's place.
 */
describe('exec channel (native agent): connecting to the host\'s socket', { skip }, () => {
  let container: string;
  let initPid: number;
  before(async () => {
    container = await startContainer('debian:bookworm-slim');
    initPid = Number((await run('docker', ['inspect', '-f', '{{.State.Pid}}', container])).stdout.trim());
  });
  after(async () => {
    if (container) await run('docker', ['rm', '--force', container]).catch(() => {});
  });

  /** One agent: its control stream as text, and a way to wait for what it says. */
  let agents = 0;
  async function startAgent() {
    // Each agent in a directory of its own, as a channel places it (it removes it on exit).
    const dir = `/tmp/ct-agent.test-${++agents}`;
    await run('docker', ['exec', container, 'mkdir', '-m', '700', dir]);
    await run('docker', ['cp', fileURLToPath(new URL('../../native/ct-exec-agent', import.meta.url)), `${container}:${dir}/ct-exec-agent`]);
    const proc = await engine!.start(container, [`${dir}/ct-exec-agent`, dir, '200'], undefined);
    const agent = { proc, dir, ctl: '', waiters: [] as (() => void)[] };
    proc.stderr.on('data', (c: Buffer) => {
      agent.ctl += c.toString('latin1');
      for (const w of agent.waiters.splice(0)) w();
    });
    return agent;
  }
  type Agent = Awaited<ReturnType<typeof startAgent>>;
  async function until(agent: Agent, re: RegExp): Promise<RegExpExecArray> {
    const deadline = Date.now() + 10_000;
    while (!re.test(agent.ctl)) {
      if (Date.now() > deadline) throw new Error(`agent did not say ${re}: ${JSON.stringify(agent.ctl)}`);
      await new Promise<void>((r) => {
        agent.waiters.push(r);
        setTimeout(r, 200);
      });
    }
    return re.exec(agent.ctl)!;
  }
  /** The host's path to a new name in the agent's directory, once it has said hello. */
  async function socketPath(agent: Agent): Promise<{ name: string; path: string }> {
    await until(agent, /^H 1 \d+ setsid stream native direct\n/);
    // Asked once the agent runs, as the channel does (the daemon knows the pid only then).
    const hostPid = await agent.proc.hostPid!();
    assert.ok(hostPid, 'the engine reports the exec\'s pid on this machine');
    const name = `ct-${token()}`;
    return { name, path: `/proc/${hostPid}/cwd/${name}` };
  }
  /** The first connection a server gets. */
  function firstConnection(server: Server): Promise<Socket> {
    return new Promise((resolve) => server.once('connection', resolve));
  }
  function request(id: number, argv: string[]): Buffer {
    const cmd = encodeChannelCommand(argv, {})!;
    return Buffer.concat([Buffer.from(`${id} 1000 0 ${cmd.native.length}\n`), cmd.native]);
  }
  /** Reads from a socket until `re` matches all it has said. */
  async function hear(sock: Socket, re: RegExp, heard = ''): Promise<string> {
    while (!re.test(heard)) {
      heard += await new Promise<string>((resolve, reject) => {
        sock.once('data', (c: Buffer) => resolve(c.toString('latin1')));
        sock.once('close', () => reject(new Error(`closed after ${JSON.stringify(heard)}`)));
      });
    }
    return heard;
  }
  /**
   * An answer's control lines (the P line without its pid) and its stdout, joined from its O
   * frames: how the output is split, and whether it comes before the X, depends on timing.
   */
  function frames(text: string): { lines: string[]; stdout: string } {
    const lines: string[] = [];
    let stdout = '';
    for (let at = 0; at < text.length; ) {
      const nl = text.indexOf('\n', at);
      if (nl < 0) throw new Error(`an unfinished line: ${JSON.stringify(text.slice(at))}`);
      const line = text.slice(at, nl);
      at = nl + 1;
      const o = /^O \d+ (\d+)$/.exec(line);
      if (o) {
        stdout += text.slice(at, at + Number(o[1]));
        at += Number(o[1]);
      } else lines.push(line.replace(/^(P \d+) \d+/, '$1'));
    }
    return { lines, stdout };
  }
  /** The agent still takes requests on the exec's stdin and answers on its stderr, and ends with it. */
  async function answersOnItsStreams(agent: Agent): Promise<void> {
    agent.ctl = '';
    agent.proc.stdin.write(request(1, ['echo', 'on the stream']));
    await until(agent, /Z 1\n/);
    assert.deepEqual(frames(agent.ctl), { lines: ['P 1 0 0', 'X 1 0', 'R 1 0 14 14 0 0', 'Z 1'], stdout: 'on the stream\n' });
    agent.proc.stdin.end();
    assert.equal(await agent.proc.exited, 0);
  }

  test('the host\'s socket and tokens set it up: the agent connects, speaks first, then answers over the socket alone', async () => {
    const agent = await startAgent();
    const agentToken = token();
    const hostToken = token();
    const { name, path } = await socketPath(agent);
    const server = listenAt(path);
    const connected = firstConnection(server);
    agent.proc.stdin.write(`D ${agentToken} ${hostToken} ${name}\n`);
    const sock = await connected;
    server.close();
    let heard = await hear(sock, /\n/);
    assert.equal(heard, `${agentToken}\n`, 'its token, before the host wrote a byte');
    sock.write(`${hostToken}\n`);
    heard = await hear(sock, /setsid direct native\n$/);
    assert.match(heard, /^H 1 \d+ setsid direct native\n$/);
    const before = agent.ctl;
    sock.write(request(1, ['sh', '-c', `echo over the socket; ls ${agent.dir}`]));
    const answer = frames(await hear(sock, /Z 1\n$/));
    assert.equal(answer.stdout, 'over the socket\nct-exec-agent\n', 'the socket file is gone once connected');
    assert.deepEqual(answer.lines, ['P 1 0 0', 'X 1 0', 'R 1 0 30 30 0 0', 'Z 1']);
    assert.equal(agent.ctl, before, 'nothing more on the exec\'s stderr');
    // Ending the exec's stdin still ends the agent, and with it the socket.
    const closed = new Promise((r) => sock.on('close', r));
    agent.proc.stdin.end();
    await closed;
    assert.equal(await agent.proc.exited, 0);
  });

  test('a listener inside the container\'s pid namespace hears nothing from the agent, which stays on its streams', async () => {
    const agent = await startAgent();
    const { name, path } = await socketPath(agent);
    // A listener in the container's pid namespace, as anything the sandbox runs is, in the
    // socket's place: it reports what the first peer said, then exits.
    const script = `const s=require('net').createServer(c=>{let g='';c.on('data',d=>g+=d);c.on('close',()=>{process.stdout.write(JSON.stringify(g));s.close()})});s.listen(${JSON.stringify(path)},()=>process.stdout.write('ready\\n'))`;
    const inside = spawn('nsenter', ['--target', String(initPid), '--pid', '--', process.execPath, '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    inside.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise((r) => inside.on('exit', r));
    while (!out.includes('ready\n')) await new Promise((r) => inside.stdout.once('data', r));
    agent.proc.stdin.write(`D ${token()} ${token()} ${name}\n`);
    await until(agent, /\nD -\n/);
    assert.equal(await exited, 0);
    assert.equal(out, 'ready\n""', 'the agent closed on it without a word');
    assert.equal((await run('docker', ['exec', container, 'ls', '-A', agent.dir])).stdout, 'ct-exec-agent\n');
    await answersOnItsStreams(agent);
  });

  test('a host that answers with the wrong token is cut off; the agent says so and stays on its streams', async () => {
    const agent = await startAgent();
    const agentToken = token();
    const { name, path } = await socketPath(agent);
    const server = listenAt(path);
    const connected = firstConnection(server);
    agent.proc.stdin.write(`D ${agentToken} ${token()} ${name}\n`);
    const sock = await connected;
    server.close();
    assert.equal(await hear(sock, /\n/), `${agentToken}\n`);
    sock.write(`${token()}\n`);
    await new Promise((r) => sock.on('close', r));
    await until(agent, /\nD -\n/);
    await answersOnItsStreams(agent);
  });

  test('a D request naming a path, or a name that is not plain, is refused as a bad header', async () => {
    for (const name of ['../x', '/tmp/x', '.hidden', 'a b']) {
      const agent = await startAgent();
      await until(agent, /^H .*\n/);
      agent.ctl = '';
      agent.proc.stdin.write(`D ${token()} ${token()} ${name}\n`);
      await until(agent, /\n/);
      assert.equal(agent.ctl, 'E bad request header\n', name);
      assert.equal(await agent.proc.exited, 0);
    }
  });
});

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ExecTimeoutError } from '../../src/errors.js';
import { LocalRunner } from '../../src/host/local-runner.js';
import { ContainerSandbox } from '../../src/sandbox/docker/container-sandbox.js';
import { DockerCli } from '../../src/sandbox/docker/docker-cli.js';
import { ExecChannelPool } from '../../src/sandbox/exec-channel/channel-pool.js';
import { EXEC_OUTPUT_LIMIT } from '../../src/sandbox/types.js';
import { EngineExec } from '../../src/sandbox/docker/engine-exec.js';
import { encodeChannelCommand } from '../../src/sandbox/exec-channel/channel-command.js';
import { ExecChannel } from '../../src/sandbox/exec-channel/exec-channel.js';
import { nativeAgentBinary } from '../../src/sandbox/exec-channel/native-agent.js';

const run = promisify(execFile);
const docker = new DockerCli(new LocalRunner());
/** The same engine through the docker CLI only (no Engine API for the channels). */
const dockerCli = new DockerCli(new LocalRunner(), 'docker', { engineApi: false });
/** The Engine API, with the channels kept on their execs' streams (no direct socket). */
const dockerStreams = new DockerCli(new LocalRunner(), 'docker', { directChannels: false });
const HOSTS = { api: docker, cli: dockerCli, streams: dockerStreams } as const;

/** A fresh container for one describe block; removed afterwards. */
async function startContainer(image: string, extra: string[] = []): Promise<string> {
  const { stdout } = await run('docker', ['run', '-d', '--rm', '--init', '--label', 'ct.test=exec-channel', ...extra, image, 'sleep', '100000']);
  return stdout.trim();
}

/** The pid of the process that started the command: the agent through a channel, 0 under plain docker exec. */
async function parentPid(sb: ContainerSandbox): Promise<number> {
  return Number((await sb.exec(['sh', '-c', 'echo $PPID'])).stdout.trim());
}

/** Pids of processes whose command line matches, read from /proc (no ps in slim images). */
async function pidsOf(container: string, pattern: string): Promise<string[]> {
  const { stdout } = await run('docker', [
    'exec',
    container,
    'sh',
    '-c',
    'for p in /proc/[0-9]*; do c=$(tr "\\0" " " < $p/cmdline 2>/dev/null); case "$c" in $1) echo ${p#/proc/};; esac; done',
    'sh',
    pattern,
  ]);
  return stdout.split('\n').filter(Boolean);
}

/** Pids of the channel agents in a container: native ones, and sh ones (or boot scripts). */
async function agentPids(container: string): Promise<string[]> {
  return [...(await pidsOf(container, '/*/ct-agent.*/ct-exec-agent /*')), ...(await pidsOf(container, 'sh -c if [ -n "${2-}" ]*'))];
}

/** Pids of native agents' spares (children forked ahead of the next call). */
async function sparePids(container: string): Promise<string[]> {
  return pidsOf(container, 'ct-exec-agent spare*');
}

/** The program name of the process that starts commands (the agent): `ct-exec-agent` or `sh`. */
async function agentName(sb: ContainerSandbox): Promise<string> {
  return (await sb.exec(['sh', '-c', 'cat /proc/$PPID/comm'])).stdout.trim();
}

const AGENT_NAME = { native: 'ct-exec-agent', sh: 'sh' } as const;

for (const [image, agent, transport] of [
  ['debian:bookworm-slim', 'native', 'api'],
  ['busybox:latest', 'native', 'api'],
  ['debian:bookworm-slim', 'sh', 'api'],
  ['busybox:latest', 'sh', 'cli'],
  ['debian:bookworm-slim', 'native', 'cli'],
  ['debian:bookworm-slim', 'native', 'streams'],
] as const) {
  const through = { api: 'the Engine API', cli: 'the docker CLI', streams: 'the Engine API, on the exec streams' }[transport];
  describe(`exec channel (${agent} agent, through ${through}) on ${image}`, () => {
    let container: string;
    let sb: ContainerSandbox;
    let plain: ContainerSandbox;
    const notices: string[] = [];

    before(async () => {
      container = await startContainer(image);
      sb = new ContainerSandbox(HOSTS[transport], container, 'default', { execAgent: agent, onNotice: (m) => notices.push(m) });
      plain = new ContainerSandbox(docker, container, 'default', { execChannel: false });
    });

    after(async () => {
      await sb?.close();
      if (container) await run('docker', ['rm', '--force', container]).catch(() => {});
    });

    test(`commands run through the channel (the ${agent} agent), not docker exec`, async () => {
      assert.notEqual(await parentPid(sb), 0);
      assert.equal(await agentName(sb), AGENT_NAME[agent]);
      // Through the Engine API no docker client process stays on this machine for the channel.
      const clients = (await run('ps', ['-eo', 'args'])).stdout.split('\n').filter((l) => l.startsWith(`docker exec -i ${container} `));
      assert.equal(clients.length, transport === 'cli' ? 1 : 0);
      // The native agent on a local engine's API answers over a socket from this process.
      const sockets = await sb.exec(['sh', '-c', 'for f in /proc/$PPID/fd/*; do readlink "$f"; done | grep -c "^socket:" || true']);
      assert.equal(sockets.stdout.trim(), agent === 'native' && transport === 'api' ? '1' : '0');
      assert.equal(await parentPid(plain), 0);
    });

    test('state does not leak between calls (cd, export, shell variables, umask)', async () => {
      await sb.exec(['sh', '-c', 'cd /tmp && export LEAK=1 && VAR=2 && umask 077']);
      await sb.exec(['true'], { cwd: '/tmp', env: { LEAK: 'from-env' } });
      const r = await sb.exec(['sh', '-c', 'pwd; echo "${LEAK-unset} ${VAR-unset}"; umask']);
      const p = await plain.exec(['sh', '-c', 'pwd; echo "${LEAK-unset} ${VAR-unset}"; umask']);
      assert.equal(r.stdout, p.stdout);
      assert.match(r.stdout, /^\/\nunset unset\n0?022\n$/);
    });

    test('a command gets the descriptors docker exec gives (0, 1, 2), none of the channel\'s', async () => {
      const fds = ['sh', '-c', 'ls /proc/$$/fd'];
      const [a, b] = [await sb.exec(fds), await plain.exec(fds)];
      assert.equal(a.stdout, b.stdout);
      assert.match(a.stdout, /^0\n1\n2\n/);
    });

    test('the environment is the one docker exec gives, plus what the call sets', async () => {
      const sorted = (s: string) => s.split('\n').sort().join('\n');
      assert.equal(sorted((await sb.exec(['env'])).stdout), sorted((await plain.exec(['env'])).stdout));
      const env = { A: 'x y', B: "it's\n$HOME" };
      assert.equal(sorted((await sb.exec(['env'], { env })).stdout), sorted((await plain.exec(['env'], { env })).stdout));
    });

    test('argv with spaces, quotes, newlines and unicode is passed exactly', async () => {
      const args = [
        'a b',
        "it's",
        '"dq"',
        'tab\there',
        'line1\nline2',
        '\n',
        '',
        'trail\n',
        ' lead',
        'cr\r\nlf',
        '$HOME',
        '`id`',
        '$(id)',
        '\\',
        "'",
        '*',
        '-n',
        '--',
        '%s%d',
        'é ✓ 🚀 日本語',
        `long ${"'quoted' \"words\"\n".repeat(300)}`,
      ];
      const show = ['sh', '-c', 'for a; do printf "[%s]" "$a"; done', 'sh'];
      const expected = args.map((a) => `[${a}]`).join('');
      assert.equal((await sb.exec([...show, ...args])).stdout, expected);
      // A script past the inline limit travels as a payload, next to stdin.
      const r = await sb.exec(['sh', '-c', 'cat; for a; do printf "[%s]" "$a"; done', 'sh', ...args], { input: 'stdin first|' });
      assert.equal(r.stdout, `stdin first|${expected}`);
    });

    test('env values and cwd with quotes, newlines and unicode are passed exactly', async () => {
      const dir = "/tmp/ct dir 'q' \"dq\" é\nline";
      await sb.exec(['mkdir', '-p', dir]);
      const value = "it's a \"value\"\n$HOME `id` é ✓";
      const r = await sb.exec(['sh', '-c', 'pwd; printf "%s" "$V"'], { cwd: dir, env: { V: value } });
      assert.equal(r.stdout, `${dir}\n${value}`);
    });

    test('50 concurrent calls each get their own output and exit code', async () => {
      const rs = await Promise.all(
        Array.from({ length: 50 }, (_, i) => sb.exec(['sh', '-c', `echo out${i}; echo err${i} >&2; exit ${i % 7}`])),
      );
      rs.forEach((r, i) => {
        assert.equal(r.stdout, `out${i}\n`);
        assert.equal(r.stderr, `err${i}\n`);
        assert.equal(r.returncode, i % 7);
      });
    });

    test('1 MB of output arrives intact', async () => {
      const expected = Array.from({ length: 200_000 }, (_, i) => `${i + 1}\n`).join('');
      assert.ok(expected.length > 1_000_000);
      assert.equal((await sb.exec(['seq', '1', '200000'])).stdout, expected);
      assert.equal((await sb.exec(['sh', '-c', 'seq 1 200000 >&2'])).stderr, expected);
    });

    test('binary stdout and stderr bytes are intact', async () => {
      const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(4096)]);
      await sb.writeFile('/tmp/ct-bin/r.bin', bytes);
      const pool = new ExecChannelPool({
        host: { runner: docker.runner, docker: 'docker', containerId: container, kill: async () => {} },
        service: 'default',
      });
      try {
        const out = await pool.exec(['cat', '/tmp/ct-bin/r.bin'], {}, { maxOutput: EXEC_OUTPUT_LIMIT });
        const err = await pool.exec(['sh', '-c', 'cat /tmp/ct-bin/r.bin >&2'], {}, { maxOutput: EXEC_OUTPUT_LIMIT });
        assert.equal(out.kind, 'done');
        assert.equal(err.kind, 'done');
        if (out.kind !== 'done' || err.kind !== 'done') return;
        assert.deepEqual(out.stdout, bytes);
        assert.deepEqual(err.stderr, bytes);
      } finally {
        await pool.close();
      }
      // And as the od dump a tool would show: the same through the channel and through docker exec.
      const od = ['od', '-An', '-tx1', '-v', '/tmp/ct-bin/r.bin'];
      assert.equal((await sb.exec(od)).stdout, (await plain.exec(od)).stdout);
      assert.deepEqual(Buffer.from(await sb.readFile('/tmp/ct-bin/r.bin', 'bytes')), bytes);
    });

    test('output past 10 MiB keeps the tail of each stream', async () => {
      const r = await sb.exec(['sh', '-c', 'seq 1 2000000; seq 1 2000000 >&2']);
      assert.equal(Buffer.byteLength(r.stdout), EXEC_OUTPUT_LIMIT);
      assert.equal(Buffer.byteLength(r.stderr), EXEC_OUTPUT_LIMIT);
      assert.ok(r.stdout.endsWith('\n1999999\n2000000\n'));
      assert.ok(r.stderr.endsWith('\n1999999\n2000000\n'));
    });

    test('writing to /dev/stdout and /dev/stderr appends, as on a pipe', async () => {
      const r = await sb.exec(['sh', '-c', 'echo a; echo b >/dev/stdout; echo c; echo x >&2; echo y >/dev/stderr; echo z >&2']);
      assert.equal(r.stdout, 'a\nb\nc\n');
      assert.equal(r.stderr, 'x\ny\nz\n');
    });

    test('a missing command or cwd gives docker exec\'s own error', async () => {
      for (const [cmd, cwd] of [[['ct-no-such-command-xyz'], undefined], [['pwd'], '/ct-no-such-dir']] as const) {
        const viaChannel = await sb.exec([...cmd], { cwd });
        const viaPlain = await plain.exec([...cmd], { cwd });
        assert.equal(viaChannel.returncode, viaPlain.returncode);
        assert.equal(viaChannel.stderr, viaPlain.stderr);
      }
    });

    test('a timeout kills the process tree and the channel stays in use', async () => {
      const agent = await parentPid(sb);
      await assert.rejects(
        sb.exec(['sh', '-c', 'echo begun; sleep 311 & sleep 312'], { timeout: 1 }),
        (e: unknown) => e instanceof ExecTimeoutError && e.stdout === 'begun\n',
      );
      assert.deepEqual(await pidsOf(container, 'sleep 31[12] '), []);
      assert.equal(await parentPid(sb), agent);
    });

    test('a background process holding stdout ends the call after the drain grace, and keeps running', async () => {
      const started = Date.now();
      const r = await sb.exec(['sh', '-c', 'echo begun; sleep 313 &']);
      assert.equal(r.stdout, 'begun\n');
      assert.equal(r.returncode, 0);
      assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
      const left = await pidsOf(container, 'sleep 313 ');
      assert.equal(left.length, 1);
      await run('docker', ['exec', container, 'sh', '-c', `kill ${left[0]}`]);
      assert.equal((await sb.exec(['echo', 'next'])).stdout, 'next\n');
    });

    test('pkill sh (SIGTERM) does not take the channel down', async () => {
      const agent = await parentPid(sb);
      const r = await sb.exec(['sh', '-c', 'kill -TERM $PPID; kill -HUP $PPID; echo survived']);
      assert.equal(r.stdout, 'survived\n');
      assert.equal(await parentPid(sb), agent);
    });

    test('a command that empties /tmp (and the channel\'s FIFOs) still gets its output', async () => {
      for (let i = 0; i < 3; i++) {
        const r = await sb.exec(['sh', '-c', 'rm -rf /tmp/* /tmp/.[!.]* 2>/dev/null; echo emptied; echo e >&2']);
        assert.equal(r.stdout, 'emptied\n');
        assert.equal(r.stderr, 'e\n');
      }
      assert.equal((await sb.exec(['echo', 'after'])).stdout, 'after\n');
      assert.notEqual(await parentPid(sb), 0);
    });

    test('a task that kills every cat process does not break later calls', async () => {
      const killCats = 'for p in /proc/[0-9]*; do read -r c < $p/comm 2>/dev/null; [ "$c" = cat ] && kill -9 ${p#/proc/}; done; true';
      await sb.exec(['sh', '-c', killCats]);
      for (let i = 0; i < 3; i++) assert.equal((await sb.exec(['echo', `still${i}`])).stdout, `still${i}\n`);
      assert.notEqual(await parentPid(sb), 0);
    });

    test('a channel killed between calls is replaced transparently', async () => {
      const agent = await parentPid(sb);
      await run('docker', ['exec', container, 'sh', '-c', `kill -KILL ${agent}`]);
      for (let i = 0; i < 5; i++) assert.equal((await sb.exec(['echo', `again${i}`])).stdout, `again${i}\n`);
      const replacement = await parentPid(sb);
      assert.notEqual(replacement, 0);
      assert.notEqual(replacement, agent);
    });

    test('a channel killed under a running command reports it killed, then recovers', async () => {
      const r = await sb.exec(['sh', '-c', 'kill -KILL $PPID; echo after']);
      assert.equal(r.returncode, 137);
      assert.match(r.stderr, /exec channel/);
      assert.equal((await sb.exec(['echo', 'recovered'])).stdout, 'recovered\n');
      assert.notEqual(await parentPid(sb), 0);
    });

    test('an unknown user gets docker exec\'s own error', async () => {
      const a = await sb.exec(['id'], { user: 'ct-no-such-user' });
      const b = await plain.exec(['id'], { user: 'ct-no-such-user' });
      assert.equal(a.returncode, b.returncode);
      assert.equal(a.stderr, b.stderr);
    });

    test('another user gets channels of its own', async () => {
      const r = await sb.exec(['sh', '-c', 'id -un; echo $PPID'], { user: 'nobody' });
      const [name, ppid] = r.stdout.trim().split('\n');
      assert.equal(name, 'nobody');
      assert.notEqual(Number(ppid), 0);
      assert.notEqual(Number(ppid), await parentPid(sb));
    });

    test('no fallback notice was given', () => {
      assert.deepEqual(notices, []);
    });
  });
}

for (const image of ['debian:bookworm-slim', 'busybox:latest']) {
  describe(`exec channel with stdout through a file (kernels without /proc/PID/io), on ${image}`, () => {
    let container: string;
    let pool: ExecChannelPool;
    const runOn = (cmd: string[], maxOutput = EXEC_OUTPUT_LIMIT) => pool.exec(cmd, {}, { maxOutput });

    before(async () => {
      container = await startContainer(image);
      pool = new ExecChannelPool({
        host: { runner: docker.runner, docker: 'docker', containerId: container, kill: async () => {} },
        service: 'default',
        fileStdout: true,
        queueWaitMs: 60_000,
      });
    });

    after(async () => {
      await pool?.close();
      if (container) await run('docker', ['rm', '--force', container]).catch(() => {});
    });

    test('output, exit codes and binary bytes arrive intact', async () => {
      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const r = await pool.exec(['sh', '-c', 'cat; echo err >&2; exit 5'], { input: bytes }, { maxOutput: EXEC_OUTPUT_LIMIT });
      assert.equal(r.kind, 'done');
      if (r.kind !== 'done') return;
      assert.deepEqual([r.code, r.stdout, r.stderr.toString()], [5, bytes, 'err\n']);
      const big = await runOn(['seq', '1', '200000']);
      assert.equal(big.kind === 'done' && big.stdout.toString(), Array.from({ length: 200_000 }, (_, i) => `${i + 1}\n`).join(''));
    });

    test('a stream past its cap keeps the tail and reports the full size', async () => {
      const r = await runOn(['sh', '-c', 'seq 1 100000; seq 1 100000 >&2'], 1000);
      assert.equal(r.kind, 'done');
      if (r.kind !== 'done') return;
      assert.equal(r.stdout.length, 1000);
      assert.equal(r.stderr.length, 1000);
      assert.ok(r.stdout.toString().endsWith('\n99999\n100000\n'));
      assert.equal(r.stdoutTotal, 588_895);
      assert.equal(r.stderrTotal, 588_895);
    });

    test('batches of readers roll over, and concurrent calls stay apart', async () => {
      const same = (r: Awaited<ReturnType<typeof runOn>>, i: number) =>
        assert.deepEqual(r.kind === 'done' && [r.stdout.toString(), r.stderr.toString()], [`o${i}\n`, i % 2 ? `e${i}\n` : '']);
      const cmd = (i: number) => ['sh', '-c', i % 2 ? `echo o${i}; echo e${i} >&2` : `echo o${i}`];
      for (let i = 0; i < 70; i++) same(await runOn(cmd(i)), i);
      (await Promise.all(Array.from({ length: 40 }, (_, i) => runOn(cmd(i))))).forEach(same);
    });
  });
}

describe('exec channel shutdown', () => {
  test('closing a sandbox while channels are still starting gives no notice', async () => {
    const container = await startContainer('busybox:latest');
    const notices: string[] = [];
    const sb = new ContainerSandbox(docker, container, 'default', { onNotice: (m) => notices.push(m) });
    // One warm channel serves a burst faster than the extra channels the burst asks for can
    // start; the sample then ends with those still starting, as at the end of a conformance run.
    await sb.exec(['true']);
    await Promise.all(Array.from({ length: 8 }, (_, i) => sb.exec(['echo', String(i)])));
    await sb.close();
    await run('docker', ['rm', '--force', container]).catch(() => {});
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(notices, []);
  });
});

describe('exec channel warm start', () => {
  /** Waits until the sandbox's pool has an idle channel for the default user. */
  async function warmed(pool: ExecChannelPool): Promise<void> {
    for (let i = 0; i < 200; i++) {
      if (pool.stats().some((s) => s.user === '' && s.idle > 0)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`no warm channel: ${JSON.stringify(pool.stats())}`);
  }

  function poolOf(sb: ContainerSandbox): ExecChannelPool {
    return (sb as unknown as { channels: ExecChannelPool }).channels;
  }

  test('warm() starts the agent before any call, and the first call uses it', async () => {
    const container = await startContainer('busybox:latest');
    const sb = new ContainerSandbox(docker, container, 'default', {});
    try {
      sb.warm();
      await warmed(poolOf(sb));
      assert.equal((await agentPids(container)).length, 1, 'one agent running before the first call');
      assert.notEqual(await parentPid(sb), 0);
      assert.deepEqual(poolOf(sb).stats(), [{ user: '', live: 1, idle: 1, disabled: undefined }]);
    } finally {
      await sb.close();
      await run('docker', ['rm', '--force', container]).catch(() => {});
    }
  });

  test('a call made while the warm start runs goes plain at once, and starts no other channel', async () => {
    const container = await startContainer('debian:bookworm-slim');
    const sb = new ContainerSandbox(docker, container, 'default', {});
    try {
      sb.warm();
      sb.warm();
      // Waiting for a start that has just begun costs more than a docker exec: the call runs
      // plain (a process docker exec started has parent pid 0 in the container).
      assert.equal(await parentPid(sb), 0);
      await warmed(poolOf(sb));
      assert.notEqual(await parentPid(sb), 0, 'once ready, calls use the warm channel');
      assert.deepEqual(poolOf(sb).stats(), [{ user: '', live: 1, idle: 1, disabled: undefined }]);
      assert.equal((await agentPids(container)).length, 1);
    } finally {
      await sb.close();
      await run('docker', ['rm', '--force', container]).catch(() => {});
    }
  });

  test('closing the sandbox during the warm start leaves no agent and gives no notice', async () => {
    const container = await startContainer('busybox:latest');
    const notices: string[] = [];
    const sb = new ContainerSandbox(docker, container, 'default', { onNotice: (m) => notices.push(m) });
    try {
      sb.warm();
      await sb.close();
      await new Promise((r) => setTimeout(r, 2500));
      assert.deepEqual(await agentPids(container), []);
      assert.deepEqual(notices, []);
    } finally {
      await run('docker', ['rm', '--force', container]).catch(() => {});
    }
  });

  test('a warm start the image refuses says so once; calls run plain', async () => {
    const container = await startContainer('busybox:latest', ['--read-only']);
    const notices: string[] = [];
    const sb = new ContainerSandbox(docker, container, 'default', { onNotice: (m) => notices.push(m) });
    try {
      sb.warm();
      for (let i = 0; i < 200 && notices.length === 0; i++) await new Promise((r) => setTimeout(r, 25));
      assert.equal(notices.length, 1);
      assert.equal((await sb.exec(['echo', 'plain'])).stdout, 'plain\n');
      assert.equal(await parentPid(sb), 0);
      assert.equal(notices.length, 1);
    } finally {
      await sb.close();
      await run('docker', ['rm', '--force', container]).catch(() => {});
    }
  });
});

describe('exec channel fallback', () => {
  let container: string;

  before(async () => {
    container = await startContainer('busybox:latest', ['--read-only']);
  });

  after(async () => {
    if (container) await run('docker', ['rm', '--force', container]).catch(() => {});
  });

  test('an image the channel cannot run in falls back to docker exec and says so once', async () => {
    const notices: string[] = [];
    const sb = new ContainerSandbox(docker, container, 'default', { onNotice: (m) => notices.push(m) });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await sb.exec(['echo', `plain${i}`])).stdout, `plain${i}\n`);
      const rs = await Promise.all(Array.from({ length: 5 }, (_, i) => sb.exec(['echo', `c${i}`])));
      rs.forEach((r, i) => assert.equal(r.stdout, `c${i}\n`));
      assert.equal(await parentPid(sb), 0);
      assert.equal(notices.length, 1);
      assert.match(notices[0]!, /exec channel off for default: .*mktemp.*; using docker exec instead/);
    } finally {
      await sb.close();
    }
  });
});

describe('exec channel: where the native agent cannot run, the sh agent serves', () => {
  let container: string;

  before(async () => {
    // A temporary directory that allows no exec: the native binary cannot start from it.
    container = await startContainer('debian:bookworm-slim', ['--tmpfs', '/tmp:rw,noexec,nosuid,size=16m']);
  });

  after(async () => {
    if (container) await run('docker', ['rm', '--force', container]).catch(() => {});
  });

  test('a noexec /tmp: calls run through the sh agent, with no notice and nothing left in /tmp', async () => {
    const notices: string[] = [];
    const sb = new ContainerSandbox(docker, container, 'default', { onNotice: (m) => notices.push(m) });
    try {
      const r = await sb.exec(['sh', '-c', 'echo out; echo err >&2; exit 3']);
      assert.deepEqual([r.stdout, r.stderr, r.returncode], ['out\n', 'err\n', 3]);
      assert.equal(await agentName(sb), 'sh');
      const left = await run('docker', ['exec', container, 'sh', '-c', 'ls -a /tmp | grep ct-agent || true']);
      assert.equal(left.stdout, '');
      assert.deepEqual(notices, []);
    } finally {
      await sb.close();
    }
  });
});

describe('exec channel (native agent): its temporary directory and processes', () => {
  test('hold the agent (and its spare) while it runs and are gone once the channel closes', async () => {
    const container = await startContainer('busybox:latest');
    const sb = new ContainerSandbox(docker, container, 'default');
    try {
      assert.equal(await agentName(sb), 'ct-exec-agent');
      const during = await run('docker', ['exec', container, 'sh', '-c', 'ls -d /tmp/ct-agent.* && ls -l /tmp/ct-agent.*/']);
      assert.match(during.stdout, /ct-exec-agent/);
      assert.match(during.stdout, /^-rwx------/m, 'only its user may read or run it');
      assert.equal((await agentPids(container)).length, 1);
      assert.equal((await sparePids(container)).length, 1, 'one spare waits for the next call');
      await sb.close();
      let left = 'x';
      for (let i = 0; i < 100 && left; i++) {
        left = (await run('docker', ['exec', container, 'sh', '-c', 'ls -d /tmp/ct-agent.* 2>/dev/null || true'])).stdout;
        if (left) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(left, '');
      // Neither the agent nor its spare outlives the channel.
      let procs = ['x'];
      for (let i = 0; i < 100 && procs.length; i++) {
        procs = [...(await agentPids(container)), ...(await sparePids(container))];
        if (procs.length) await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(procs, []);
    } finally {
      await sb.close();
      await run('docker', ['rm', '--force', container]).catch(() => {});
    }
  });
});

/**
 * The native agent's direct socket, driven by hand: the agent started through the Engine API
 * as a channel starts it, the D offer made and answered by the test in the host's place.
 */
describe('exec channel (native agent): the direct socket into the container', { skip: !nativeAgentBinary() && 'the native agent was not built' }, () => {
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
    const proc = await EngineExec.local()!.start(container, [`${dir}/ct-exec-agent`, dir, '200']);
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
  /** Offers the socket; resolves with the host's path to it. */
  async function offer(agent: Agent, agentToken: string, hostToken: string): Promise<string> {
    await until(agent, /^H 1 \d+ setsid stream native direct\n/);
    agent.proc.stdin.write(`D ${agentToken} ${hostToken}\n`);
    const path = (await until(agent, /\nD (\/\S+)\n/))[1]!;
    // Asked once the agent runs, as the channel does (the daemon knows the pid only then).
    const hostPid = await agent.proc.hostPid!();
    assert.ok(hostPid, 'the engine reports the exec\'s pid on this machine');
    return `/proc/${hostPid}/root${path}`;
  }
  function request(id: number, argv: string[]): Buffer {
    const cmd = encodeChannelCommand(argv, {})!;
    return Buffer.concat([Buffer.from(`${id} 1000 0 ${cmd.native.length}\n`), cmd.native]);
  }
  /** What a peer hears on the socket before it is closed on, having answered `reply` to the first line. */
  function listen(path: string, reply?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const sock = connect(path);
      let got = '';
      sock.on('data', (c: Buffer) => {
        got += c.toString('latin1');
        if (reply !== undefined && got.endsWith('\n')) sock.write(reply);
      });
      sock.on('close', () => resolve(got));
      sock.on('error', reject);
    });
  }
  const token = () => randomBytes(16).toString('hex');
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

  test('the host\'s tokens set it up: the agent speaks first, then answers over the socket alone', async () => {
    const agent = await startAgent();
    const agentToken = token();
    const hostToken = token();
    const path = await offer(agent, agentToken, hostToken);
    const sock = connect(path);
    let heard = '';
    const hear = async (re: RegExp) => {
      while (!re.test(heard)) await new Promise((r) => sock.once('data', (c: Buffer) => r((heard += c.toString('latin1')))));
    };
    await hear(/\n/);
    assert.equal(heard, `${agentToken}\n`, 'its token, before the host wrote a byte');
    sock.write(`${hostToken}\n`);
    await hear(/setsid direct native\n$/);
    assert.match(heard, /\nH 1 \d+ setsid direct native\n$/);
    heard = '';
    const before = agent.ctl;
    sock.write(request(1, ['sh', '-c', `echo over the socket; ls ${agent.dir}`]));
    await hear(/Z 1\n$/);
    const answer = frames(heard);
    assert.equal(answer.stdout, 'over the socket\nct-exec-agent\n', 'the socket file is gone once connected');
    assert.deepEqual(answer.lines, ['P 1 0 0', 'X 1 0', 'R 1 0 30 30 0 0', 'Z 1']);
    assert.equal(agent.ctl, before, 'nothing more on the exec\'s stderr');
    // Ending the exec's stdin still ends the agent, and with it the socket.
    const closed = new Promise((r) => sock.on('close', r));
    agent.proc.stdin.end();
    await closed;
    assert.equal(await agent.proc.exited, 0);
  });

  test('a process inside the container that connects first hears nothing, and the agent stays on its streams', async () => {
    const agent = await startAgent();
    const path = await offer(agent, token(), token());
    // A peer in the container's pid namespace, as anything the sandbox runs is.
    const script = `const s=require('net').connect(${JSON.stringify(path)});let g='';s.on('data',c=>g+=c);s.on('close',()=>process.stdout.write(JSON.stringify(g)));s.on('error',e=>process.stdout.write('error '+e.code))`;
    const inside = await run('nsenter', ['--target', String(initPid), '--pid', '--', process.execPath, '-e', script]);
    assert.equal(inside.stdout, '""');
    // The attempt is over: the host's own connection is refused, and requests go by the stream.
    await assert.rejects(listen(path), /ENOENT|ECONNREFUSED/);
    await answersOnItsStreams(agent);
  });

  test('a peer outside that answers with the wrong token is cut off; the agent stays on its streams', async () => {
    const agent = await startAgent();
    const agentToken = token();
    const path = await offer(agent, agentToken, token());
    assert.equal(await listen(path, `${token()}\n`), `${agentToken}\n`);
    await answersOnItsStreams(agent);
  });

  test('a channel whose socket cannot be reached stays on its streams, at once', async () => {
    const engine = EngineExec.local()!;
    const started = Date.now();
    // The exec's pid as a Docker Engine in a VM would give it: no such process here.
    const ch = await ExecChannel.start({
      runner: new LocalRunner(),
      docker: 'docker',
      containerId: container,
      kill: async () => {},
      startExec: async (cmd, user) => Object.assign(await engine.start(container, cmd, user), { hostPid: async () => 999_999_999 }),
    }, undefined);
    try {
      assert.ok(Date.now() - started < 1_500, `started in ${Date.now() - started} ms`);
      assert.equal(ch.agent, 'native');
      assert.equal(ch.transport, 'stream');
      const r = await ch.run(encodeChannelCommand(['echo', 'fine'], {})!, { maxOutput: 1000 });
      assert.equal(r.kind, 'done');
      assert.equal(r.kind === 'done' && r.stdout.toString(), 'fine\n');
    } finally {
      ch.close();
    }
  });
});

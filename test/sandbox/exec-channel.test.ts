import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ExecTimeoutError } from '../../src/errors.js';
import { LocalRunner } from '../../src/host/local-runner.js';
import { ContainerSandbox } from '../../src/sandbox/docker/container-sandbox.js';
import { DockerCli } from '../../src/sandbox/docker/docker-cli.js';
import { ExecChannelPool } from '../../src/sandbox/exec-channel/channel-pool.js';
import { EXEC_OUTPUT_LIMIT } from '../../src/sandbox/types.js';

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

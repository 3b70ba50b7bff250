/**
 * Exec channel vs `docker exec`, side by side on one running container:
 *   channel   ContainerSandbox with its exec channel (the default);
 *   plain     ContainerSandbox with `execChannel: false` (one `docker exec` per call);
 *   raw       the `docker exec` CLI spawned directly, no ct code in between.
 * Per-call latency (median, p95) for `echo hi`, a 1 MB stdout, a 100 KB file write and read;
 * then 50 concurrent `echo`s on one sandbox with 1, 2, 4 and 8 channels (the pool's size).
 * Usage: node dist/bench/exec-channel.js [--quick] [--image debian:bookworm-slim]
 */
import { execFile, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { promisify } from 'node:util';
import { LocalRunner } from '../src/host/local-runner.js';
import { ContainerSandbox } from '../src/sandbox/docker/container-sandbox.js';
import { DockerCli } from '../src/sandbox/docker/docker-cli.js';
import { ExecChannelPool } from '../src/sandbox/exec-channel/channel-pool.js';
import { fmt, median, p95, repeat, table, timeMs } from './stats.js';

const run = promisify(execFile);
const quick = process.argv.includes('--quick');
const imageArg = process.argv.indexOf('--image');
const IMAGE = imageArg > 0 ? process.argv[imageArg + 1]! : 'debian:bookworm-slim';
/** Calls per cell and way (--quick: 20). */
const N = quick ? 20 : 100;
const CONCURRENT = 50;
const ROUNDS = 5;
const ONE_MB = 1024 * 1024;
const HUNDRED_KB = 100 * 1024;

/** Raw `docker exec`, stdin fed when given (what a hand-written integration would do). */
function rawExec(args: string[], input?: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['exec', ...(input ? ['-i'] : []), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`docker exec exited ${code}`))));
    child.stdin.end(input);
  });
}

async function main() {
  const runner = new LocalRunner();
  const docker = new DockerCli(runner);
  const name = `ct-bench-channel-${process.pid}`;
  const container = (await run('docker', ['run', '-d', '--rm', '--init', '--name', name, IMAGE, 'sleep', 'infinity'])).stdout.trim();
  const notices: string[] = [];
  const channel = new ContainerSandbox(docker, container, 'default', { onNotice: (m) => notices.push(m) });
  const plain = new ContainerSandbox(docker, container, 'default', { execChannel: false });
  try {
    const payload = Buffer.alloc(HUNDRED_KB, 'x');
    await channel.writeFile('/tmp/bench/1m', Buffer.alloc(ONE_MB, 'y'));
    await channel.writeFile('/tmp/bench/100k', payload);
    await channel.exec(['true']);

    const cells: [string, number, { channel: () => Promise<unknown>; plain: () => Promise<unknown>; raw: () => Promise<unknown> }][] = [
      [
        'exec `echo hi`',
        N,
        {
          channel: () => channel.exec(['echo', 'hi']),
          plain: () => plain.exec(['echo', 'hi']),
          raw: () => rawExec([container, 'echo', 'hi']),
        },
      ],
      [
        // What tool calls send: a timeout, so the command runs as its own session (setsid).
        'exec `echo hi`, 60 s timeout',
        N,
        {
          channel: () => channel.exec(['echo', 'hi'], { timeout: 60 }),
          plain: () => plain.exec(['echo', 'hi'], { timeout: 60 }),
          raw: () => rawExec([container, 'timeout', '60', 'echo', 'hi']),
        },
      ],
      [
        'exec, 1 MB stdout',
        N,
        {
          channel: () => channel.exec(['cat', '/tmp/bench/1m']),
          plain: () => plain.exec(['cat', '/tmp/bench/1m']),
          raw: () => rawExec([container, 'cat', '/tmp/bench/1m']),
        },
      ],
      [
        'writeFile 100 KB',
        N,
        {
          channel: () => channel.writeFile('/tmp/bench/w', payload),
          plain: () => plain.writeFile('/tmp/bench/w', payload),
          raw: () => rawExec([container, 'sh', '-c', 'cat > /tmp/bench/w'], payload),
        },
      ],
      [
        'readFile 100 KB',
        N,
        {
          channel: () => channel.readFile('/tmp/bench/100k', 'bytes'),
          plain: () => plain.readFile('/tmp/bench/100k', 'bytes'),
          raw: () => rawExec([container, 'cat', '/tmp/bench/100k']),
        },
      ],
    ];

    const rows: string[][] = [];
    for (const [what, n, fns] of cells) {
      // Blocks of each way in turn, ROUNDS times, so a busy neighbour on the host slows all three
      // alike; within a block calls run back to back, so a channel call does not pay for the
      // teardown of the docker exec just before it.
      const t = { channel: [] as number[], plain: [] as number[], raw: [] as number[] };
      for (let round = 0; round < ROUNDS; round++) {
        for (const k of ['channel', 'plain', 'raw'] as const) t[k].push(...(await repeat(Math.ceil(n / ROUNDS), fns[k])));
      }
      const rawMed = median(t.raw);
      for (const k of ['channel', 'plain', 'raw'] as const) {
        rows.push([what, k, String(n), fmt(median(t[k])), fmt(p95(t[k])), (median(t[k]) / rawMed).toFixed(3)]);
      }
    }

    // The floor: what the same process starts cost inside the container with nothing around
    // them, from a sh loop of `count` calls minus the same docker exec with none.
    const floors: string[][] = [];
    const loop = 'i=0; while [ "$i" -lt "$1" ]; do eval "$2" >/dev/null; i=$((i + 1)); done';
    for (const [what, body] of [
      ['`/bin/echo hi` (fork + exec)', '/bin/echo hi'],
      ['`setsid echo hi` (fork + 2 execs: a channel call)', 'setsid echo hi'],
    ] as const) {
      const count = quick ? 50 : 200;
      const per: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const empty = await timeMs(() => rawExec([container, 'sh', '-c', loop, 'sh', '0', body]));
        const full = await timeMs(() => rawExec([container, 'sh', '-c', loop, 'sh', String(count), body]));
        per.push(Math.max(0, full - empty) / count);
      }
      floors.push([what, String(count), fmt(median(per)), fmt(Math.min(...per)), fmt(Math.max(...per))]);
    }

    // Concurrency: one pool per size, warmed to its size first so start-up is not measured.
    const concurrency: string[][] = [];
    const host = { runner, docker: 'docker', containerId: container, kill: async () => {} };
    for (const size of [1, 2, 4, 8]) {
      const pool = new ExecChannelPool({ host, service: 'bench', maxChannels: size, queueWaitMs: 60_000 });
      const burst = () => Promise.all(Array.from({ length: CONCURRENT }, (_, i) => pool.exec(['echo', String(i)], {}, { maxOutput: 1024 })));
      await burst();
      const walls = await repeat(quick ? 3 : 10, burst);
      concurrency.push([`${CONCURRENT} concurrent \`echo\``, `${size} channel${size > 1 ? 's' : ''}`, fmt(median(walls)), fmt(Math.max(...walls))]);
      await pool.close();
    }
    const plainWall = await timeMs(() => Promise.all(Array.from({ length: CONCURRENT }, (_, i) => plain.exec(['echo', String(i)]))));
    concurrency.push([`${CONCURRENT} concurrent \`echo\``, 'plain docker exec', fmt(plainWall), fmt(plainWall)]);

    const version = (await run('docker', ['version', '--format', '{{.Server.Version}}'])).stdout.trim();
    console.log(
      `\nExec channel vs docker exec (image ${IMAGE}, Docker Engine ${version}, ${cpus().length} CPUs, node ${process.version}, ` +
        `${N} calls a cell and way; ratios are medians over raw docker exec)\n`,
    );
    console.log(table(['what', 'how', 'calls', 'median ms', 'p95 ms', 'ratio vs raw'], rows));
    console.log('\nIn-container floor per call (a sh loop inside the container; no ct, no docker per call):\n');
    console.log(table(['what', 'calls a round', 'median ms', 'min ms', 'max ms'], floors));
    console.log('\n' + table(['what', 'how', 'median wall ms', 'max wall ms'], concurrency));
    if (notices.length > 0) console.log(`\nnotices: ${notices.join('; ')}`);
  } finally {
    await channel.close();
    await run('docker', ['rm', '--force', container]).catch(() => {});
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

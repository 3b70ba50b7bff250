/**
 * Exec round trip and per-sample sandbox overhead, measured side by side on one machine:
 *   exec:    ct's sandbox exec (persistent channel, and plain) vs raw `docker exec` vs
 *            `docker compose exec`, on the same running container;
 *   sample:  ct's sampleInit + sampleCleanup vs raw `compose up` (+ wait) and `compose down`.
 * Usage: node dist/bench/sandbox-overhead.js [--quick]
 */
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { LocalRunner } from '../src/host/local-runner.js';
import { ComposeCommand } from '../src/sandbox/docker/compose.js';
import { ContainerSandbox } from '../src/sandbox/docker/container-sandbox.js';
import { DockerProvider } from '../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../src/sandbox/run-registry.js';
import { fmt, median, p95, repeat, table } from './stats.js';

const run = promisify(execFile);
const quick = process.argv.includes('--quick');
const EXEC_N = quick ? 10 : 100;
const SAMPLE_N = quick ? 2 : 5;
const compose = join(process.cwd(), 'examples', 'settings', 'demo', 'notes_app', 'codebase', 'compose.yml');
const env = { name: 'notes_app', composeFile: compose };

async function main() {
  const runner = new LocalRunner();
  const registry = new RunRegistry(join(tmpdir(), 'ct-bench-state'));
  const runId = newRunId();
  registry.register(runId);
  const cc = await ComposeCommand.detect(runner);
  const rows: string[][] = [];

  // --- exec on one running container
  const provider = new DockerProvider({ runner, runId, registry, execChannel: true });
  await provider.taskInit(env);
  const sbs = await provider.sampleInit(env, { label: 'bench-exec' });
  const sb = sbs.get('default')!;
  const container = (sb as unknown as { containerId: string }).containerId;
  const plain = new ContainerSandbox(provider.docker, container, 'default', { execChannel: false });
  const project = (await run('docker', ['inspect', '--format', '{{index .Config.Labels "com.docker.compose.project"}}', container])).stdout.trim();
  await sb.exec(['true']);
  const ours = await repeat(EXEC_N, () => sb.exec(['echo', 'hi']));
  const oursPlain = await repeat(EXEC_N, () => plain.exec(['echo', 'hi']));
  const raw = await repeat(EXEC_N, () => run('docker', ['exec', container, 'echo', 'hi']));
  const composeExec = await repeat(Math.min(EXEC_N, 20), () =>
    run(cc.argv(project, [compose], ['exec', '-T', 'default', 'echo', 'hi'])[0]!, cc.argv(project, [compose], ['exec', '-T', 'default', 'echo', 'hi']).slice(1)),
  );
  await provider.sampleCleanup(sbs);
  const rawMed = median(raw);
  for (const [name, xs] of [
    ['ct exec (channel)', ours],
    ['ct exec (plain docker exec)', oursPlain],
    ['raw `docker exec`', raw],
    [`\`${cc.version === 'v2' ? 'docker compose' : 'docker-compose'} exec\``, composeExec],
  ] as const) {
    rows.push(['exec `echo hi`', name, fmt(median(xs)), fmt(p95(xs)), (median(xs) / rawMed).toFixed(3)]);
  }

  // --- per-sample sandbox overhead
  const init: number[] = [];
  const clean: number[] = [];
  for (let i = 0; i < SAMPLE_N; i++) {
    let s!: Awaited<ReturnType<DockerProvider['sampleInit']>>;
    init.push(await timeIt(async () => (s = await provider.sampleInit(env, { label: `bench-${i}` }))));
    clean.push(await timeIt(() => provider.sampleCleanup(s)));
  }
  const rawUp: number[] = [];
  const rawDown: number[] = [];
  for (let i = 0; i < SAMPLE_N; i++) {
    const p = `ctbench-raw-${runId}-${i}`;
    const upArgs = cc.version === 'v2' ? ['up', '-d', '--wait'] : ['up', '-d'];
    rawUp.push(await timeIt(() => run(cc.argv(p, [compose], upArgs)[0]!, cc.argv(p, [compose], upArgs).slice(1))));
    rawDown.push(await timeIt(() => run(cc.argv(p, [compose], ['down'])[0]!, cc.argv(p, [compose], ['down']).slice(1))));
  }
  const ourTotal = init.map((x, i) => x + clean[i]!);
  const rawTotal = rawUp.map((x, i) => x + rawDown[i]!);
  rows.push(['sample init', 'ct sampleInit', fmt(median(init)), fmt(p95(init)), (median(init) / median(rawUp)).toFixed(3)]);
  rows.push(['sample init', `raw compose up${cc.version === 'v2' ? ' --wait' : ''}`, fmt(median(rawUp)), fmt(p95(rawUp)), '1.000']);
  rows.push(['sample cleanup', 'ct sampleCleanup', fmt(median(clean)), fmt(p95(clean)), (median(clean) / median(rawDown)).toFixed(3)]);
  rows.push(['sample cleanup', 'raw compose down', fmt(median(rawDown)), fmt(p95(rawDown)), '1.000']);
  rows.push(['init + cleanup', 'ct', fmt(median(ourTotal)), fmt(p95(ourTotal)), (median(ourTotal) / median(rawTotal)).toFixed(3)]);
  rows.push(['init + cleanup', 'raw compose up + down', fmt(median(rawTotal)), fmt(p95(rawTotal)), '1.000']);
  registry.unregister(runId);

  console.log(`\nSandbox overhead (compose ${cc.version}, ${EXEC_N} execs, ${SAMPLE_N} samples, one-service environment notes_app)\n`);
  console.log(table(['what', 'how', 'median ms', 'p95 ms', 'ratio vs raw'], rows));
}

async function timeIt(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

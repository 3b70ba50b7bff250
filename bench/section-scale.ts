/**
 * Section scale: does a run's cost stay flat in its size? `ct run eval --sandbox local --policy
 * test` over the demo task set × epochs (so almost nothing but ct runs), at 100 / 1,000 / 10,000
 * samples (100,000 in the full run), `--max-samples 8`; and Inspect writing a log of the same
 * number of samples (its `mockllm/model`, no sandbox, `--max-samples 8`) up to a size where it
 * still finishes in reasonable time. Then the merge: N one-sample logs into one.
 *
 * ct's overhead per sample is its own CPU time (user+sys of the ct process, the scorer and setup
 * processes it runs excluded) divided by the samples: on a shared machine wall time measures the
 * neighbours too. Wall time per sample is shown beside it. Peak RSS is the process's own.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CT_BIN, REPO_ROOT, inspectBin } from './orchestrators.js';
import type { Row } from './report.js';
import { writeOneSampleLogs } from './scale-logs.js';
import type { Workspace } from './workspace.js';

export interface ScaleOptions {
  sizes: number[];
  /** Inspect runs up to this many samples; above, its cells say skipped. */
  inspectMax: number;
  /** One-sample logs merged into one. */
  mergeInputs: number;
  log: (line: string) => void;
}

export interface ScaleRun {
  system: 'ct' | 'inspect';
  samples: number;
  wallS: number;
  cpuSeconds: number;
  maxRssMb: number;
  logMb: number;
}

export interface MergeRun {
  inputs: number;
  seconds: number;
  cpuSeconds: number;
  maxRssMb: number;
  logMb: number;
}

const SECTION = 'scale';
export const SCALE_METRICS = [
  'wall per sample, ms',
  'orchestrator CPU per sample, ms',
  'CPU per sample vs the 100-sample run',
  'peak RSS, MB',
  'log size, MB',
] as const;

/** The demo task set has 4 samples; sizes are reached with epochs. */
const DEMO_SAMPLES = 4;

const INSPECT_SCALE_TASK = `from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

@task
def scale(n: int = 100):
    return Task(dataset=[Sample(id=i + 1, input=f"Sample {i + 1}: answer with anything.", target="Default") for i in range(n)],
                solver=generate(), scorer=includes())
`;

export async function scaleSection(ws: Workspace, o: ScaleOptions): Promise<{ rows: Row[]; runs: ScaleRun[]; merge: MergeRun }> {
  const dir = join(ws.dir, 'scale');
  mkdirSync(dir, { recursive: true });
  const runs: ScaleRun[] = [];
  for (const n of o.sizes) {
    o.log(`scale: ct, ${n} samples...`);
    runs.push(await runCtScale(dir, n));
    if (n <= o.inspectMax) {
      o.log(`scale: Inspect, ${n} samples...`);
      runs.push(await runInspectScale(dir, n));
    }
  }
  o.log(`scale: merge of ${o.mergeInputs} one-sample logs...`);
  const merge = await runMerge(dir, o.mergeInputs);
  rmSync(dir, { recursive: true, force: true });
  return { rows: scaleRows(runs, merge, o), runs, merge };
}

function scaleRows(runs: ScaleRun[], merge: MergeRun, o: ScaleOptions): Row[] {
  const rows: Row[] = [];
  const perSampleCpu = (r: ScaleRun) => (r.cpuSeconds * 1000) / r.samples;
  const base = (system: ScaleRun['system']) => runs.find((r) => r.system === system && r.samples === o.sizes[0]);
  for (const n of o.sizes) {
    const config = `${n.toLocaleString('en-US')} samples, --max-samples 8`;
    const ct = runs.find((r) => r.system === 'ct' && r.samples === n)!;
    const inspect = runs.find((r) => r.system === 'inspect' && r.samples === n);
    const skipped = inspect ? undefined : { inspect: `skipped: above ${o.inspectMax.toLocaleString('en-US')} samples` };
    const values = (f: (r: ScaleRun) => number) => ({ ct: [f(ct)], ...(inspect && { inspect: [f(inspect)] }) });
    const vsBase = (r: ScaleRun) => perSampleCpu(r) / perSampleCpu(base(r.system) ?? r);
    rows.push({ section: SECTION, config, metric: SCALE_METRICS[0], values: values((r) => (r.wallS * 1000) / r.samples), ...(skipped && { text: skipped }) });
    rows.push({ section: SECTION, config, metric: SCALE_METRICS[1], values: values(perSampleCpu), ...(skipped && { text: skipped }) });
    rows.push({ section: SECTION, config, metric: SCALE_METRICS[2], values: values(vsBase), ...(skipped && { text: skipped }) });
    rows.push({ section: SECTION, config, metric: SCALE_METRICS[3], values: values((r) => r.maxRssMb), ...(skipped && { text: skipped }) });
    rows.push({ section: SECTION, config, metric: SCALE_METRICS[4], values: values((r) => r.logMb), ...(skipped && { text: skipped }) });
  }
  const config = `merge of ${merge.inputs.toLocaleString('en-US')} one-sample logs`;
  rows.push({ section: SECTION, config, metric: 'merge wall, s', values: { ct: [merge.seconds] } });
  rows.push({ section: SECTION, config, metric: 'merge peak RSS, MB', values: { ct: [merge.maxRssMb] } });
  rows.push({ section: SECTION, config, metric: 'merged log size, MB', values: { ct: [merge.logMb] } });
  return rows;
}

async function runCtScale(dir: string, n: number): Promise<ScaleRun> {
  const logDir = join(dir, `ct-${n}`);
  const usageFile = join(dir, `ct-${n}.usage.json`);
  const hook = pathToFileURL(join(REPO_ROOT, 'dist', 'bench', 'usage-hook.js')).href;
  const argv = [
    process.execPath,
    '--import',
    hook,
    CT_BIN,
    'run',
    'eval',
    '--sandbox',
    'local',
    '--policy',
    'test',
    '--task-file',
    'demo',
    '--epochs',
    String(Math.ceil(n / DEMO_SAMPLES)),
    '--max-samples',
    '8',
    '--log-dir',
    logDir,
    '--quiet',
    '--json',
  ];
  const env = { ...process.env, CT_SETTINGS_DIR: join(REPO_ROOT, 'examples', 'settings'), CT_BENCH_USAGE_FILE: usageFile };
  const { code, wallS, output } = await run(argv, dir, env);
  // Exit 1 is expected: the demo's kv_service samples need its store service, which `local` lacks.
  if (code !== 0 && code !== 1) throw new Error(`ct run eval (${n} samples) failed with exit ${code}\n${output.slice(-3000)}`);
  const usage = JSON.parse(readFileSync(usageFile, 'utf8')) as { cpuSeconds: number; maxRssMb: number };
  return { system: 'ct', samples: n, wallS, ...usage, logMb: logSize(logDir) };
}

async function runInspectScale(dir: string, n: number): Promise<ScaleRun> {
  const logDir = join(dir, `inspect-${n}`);
  const taskFile = join(dir, 'inspect_scale.py');
  writeFileSync(taskFile, INSPECT_SCALE_TASK);
  const argv = [
    '/usr/bin/time',
    '-f',
    'BENCH_TIME %U %S %M',
    inspectBin(),
    'eval',
    `${taskFile}@scale`,
    '-T',
    `n=${n}`,
    '--model',
    'mockllm/model',
    '--max-samples',
    '8',
    '--log-dir',
    logDir,
    '--display',
    'none',
    '--no-log-images',
  ];
  const { code, wallS, output } = await run(argv, dir, { ...process.env, NO_COLOR: '1' });
  const m = /BENCH_TIME ([\d.]+) ([\d.]+) (\d+)/.exec(output);
  if (code !== 0 || !m) throw new Error(`inspect eval (${n} samples) failed with exit ${code}\n${output.slice(-3000)}`);
  return { system: 'inspect', samples: n, wallS, cpuSeconds: Number(m[1]) + Number(m[2]), maxRssMb: Number(m[3]) / 1024, logMb: logSize(logDir) };
}

async function runMerge(dir: string, inputs: number): Promise<MergeRun> {
  const inputDir = join(dir, 'merge-inputs');
  await writeOneSampleLogs(inputDir, inputs);
  const { code, output } = await run([process.execPath, join(REPO_ROOT, 'dist', 'bench', 'merge-child.js'), inputDir, join(dir, 'merged')], dir, process.env);
  if (code !== 0) throw new Error(`merge of ${inputs} logs failed with exit ${code}\n${output.slice(-3000)}`);
  const r = JSON.parse(output.trim().split('\n').pop()!) as { seconds: number; cpuSeconds: number; maxRssMb: number; logMb: number; samples: number };
  if (r.samples !== inputs) throw new Error(`merge wrote ${r.samples} samples from ${inputs} logs`);
  return { inputs, seconds: r.seconds, cpuSeconds: r.cpuSeconds, maxRssMb: r.maxRssMb, logMb: r.logMb };
}

function logSize(logDir: string): number {
  const logs = readdirSync(logDir).filter((f) => f.endsWith('.eval'));
  if (logs.length !== 1) throw new Error(`expected one log in ${logDir}, found ${logs.length}`);
  return statSync(join(logDir, logs[0]!)).size / 2 ** 20;
}

function run(argv: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; wallS: number; output: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    // Keep the tail only: a --json outcome of 100,000 samples is large.
    const keep = (d: Buffer) => {
      output = (output + d.toString()).slice(-20_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, wallS: (performance.now() - started) / 1000, output }));
  });
}

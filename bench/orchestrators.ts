/**
 * Runs one eval through each orchestrator as a user would: `ct run eval` (the package's bin)
 * and `inspect eval` of the generated task, each a child process measured by runChild.
 */
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runChild, tail, type ChildRun } from './child-usage.js';
import type { BenchEnv, Trajectory, Workspace } from './workspace.js';

/** The repository root (this file runs from dist/bench/). */
export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CT_BIN = join(REPO_ROOT, 'bin', 'ct.js');

export interface EvalRunSpec {
  env: BenchEnv;
  trajectory: Trajectory;
  /** Samples (epochs of the one sample). */
  samples: number;
  /** Samples running at once. */
  concurrency: number;
  logDir: string;
}

export interface EvalRun {
  child: ChildRun;
  logPath: string;
  /** Inspect only: wall-clock spans of its sandbox sample_init / sample_cleanup (epoch seconds). */
  phases?: Array<{ phase: 'init' | 'cleanup'; start: number; end: number }>;
}

/** `ct run eval --policy replay` in the workspace's settings root. */
export async function runCt(ws: Workspace, spec: EvalRunSpec, extraArgs: string[] = [], extraEnv: NodeJS.ProcessEnv = {}): Promise<EvalRun> {
  const argv = [
    process.execPath,
    CT_BIN,
    'run',
    'eval',
    '-e',
    spec.env.id,
    '-t',
    ws.mainTask,
    '--policy',
    'replay',
    '--trajectory',
    spec.trajectory.ctFile,
    '--epochs',
    String(spec.samples),
    '--max-samples',
    String(spec.concurrency),
    '--log-dir',
    spec.logDir,
    '--quiet',
    '--json',
    ...extraArgs,
  ];
  const child = await runChild(argv, {
    cwd: ws.dir,
    env: { ...process.env, CT_SETTINGS_DIR: ws.settingsRoot, CT_STATE_DIR: ws.stateDir, NO_COLOR: '1', ...extraEnv },
  });
  let out: { log?: string; status?: string; samples?: Array<{ error?: string; scores?: Record<string, string> }> } = {};
  try {
    out = JSON.parse(child.stdout.trim().split('\n').pop() ?? '{}');
  } catch {
    // Reported below with ct's own output.
  }
  const bad = (out.samples ?? []).filter((s) => s.error || s.scores?.main_task_success !== 'C');
  if (child.code !== 0 || !out.log || bad.length > 0 || out.samples?.length !== spec.samples) {
    throw new Error(
      `ct run eval (${spec.env.id}, N=${spec.trajectory.n}, ${spec.samples} samples) failed with exit ${child.code}` +
        `${bad.length ? `; ${bad.length} sample(s) not correct: ${bad[0]!.error ?? JSON.stringify(bad[0]!.scores)}` : ''}\n` +
        tail(child.stderr + child.stdout),
    );
  }
  return { child, logPath: out.log };
}

let inspectBinary: string | undefined;
let engineOverride: string | null | undefined;

/** The `inspect` script next to the python3 that has inspect_ai (skipping shell shims). */
export function inspectBin(): string {
  inspectBinary ??= execFileSync('python3', ['-c', 'import os, sys; print(os.path.join(os.path.dirname(sys.executable), "inspect"))'], {
    encoding: 'utf8',
  }).trim();
  return inspectBinary;
}

/** Inspect's docker sandbox asks for Engine >= this. */
export const INSPECT_MIN_ENGINE = '24.0.6';

/**
 * The local Engine's version when it is older than Inspect's minimum (then the generated task
 * relaxes that one check, which the calls benchmarked here do not need), else null.
 */
export function inspectEngineOverride(): string | null {
  if (engineOverride === undefined) {
    const v = execFileSync('docker', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' }).trim().replace(/[+-].*$/, '');
    engineOverride = compareVersions(v, INSPECT_MIN_ENGINE) < 0 ? v : null;
  }
  return engineOverride;
}

function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}

/**
 * Inspect's subprocess limit for a run: it defaults to the CPU count (2 here), and every
 * `docker compose exec` of every sample holds one, so it is raised to keep pace with the
 * samples running at once (each sample makes one call at a time).
 */
export function inspectSubprocesses(concurrency: number): number {
  return Math.max(availableParallelism(), 2 * concurrency);
}

/** `inspect eval` of the generated task with the mockllm model and Inspect's docker sandbox. */
export async function runInspect(ws: Workspace, spec: EvalRunSpec): Promise<EvalRun> {
  const phaseLog = join(spec.logDir, 'phases.jsonl');
  const argv = [
    inspectBin(),
    'eval',
    `${ws.inspectTask}@bench`,
    '-T',
    `compose=${spec.env.composeFile}`,
    '-T',
    `trajectory=${spec.trajectory.inspectFile}`,
    '--model',
    'mockllm/model',
    '--epochs',
    String(spec.samples),
    '--max-samples',
    String(spec.concurrency),
    '--max-sandboxes',
    String(spec.concurrency),
    '--max-subprocesses',
    String(inspectSubprocesses(spec.concurrency)),
    '--log-dir',
    spec.logDir,
    '--display',
    'none',
    '--no-log-images',
    '--no-log-realtime',
  ];
  const override = inspectEngineOverride();
  const child = await runChild(argv, {
    cwd: ws.dir,
    env: {
      ...process.env,
      BENCH_PHASE_LOG: phaseLog,
      ...(override ? { BENCH_MIN_DOCKER_ENGINE: override } : {}),
      NO_COLOR: '1',
    },
  });
  const logs = existsSync(spec.logDir) ? readdirSync(spec.logDir).filter((f) => f.endsWith('.eval')) : [];
  if (child.code !== 0 || logs.length !== 1) {
    throw new Error(`inspect eval (${spec.env.id}, N=${spec.trajectory.n}, ${spec.samples} samples) failed with exit ${child.code}\n${tail(child.stderr + child.stdout)}`);
  }
  const phases = existsSync(phaseLog)
    ? readFileSync(phaseLog, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { phase: 'init' | 'cleanup'; start: number; end: number })
    : [];
  return { child, logPath: join(spec.logDir, logs[0]!), phases };
}

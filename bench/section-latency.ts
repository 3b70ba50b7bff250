/**
 * Section 1: the same environment and the same N-call trajectory through ct, Inspect and raw
 * docker. Repetitions are R samples run one after another: ct and Inspect each run one eval of
 * R epochs at concurrency 1 (one process start per configuration, as a real eval pays it once),
 * raw runs R samples. The order of the three systems rotates per configuration.
 * Per-sample figures come from the logs; each process's start-up (spawn to its first sandbox
 * init) and wind-down (last cleanup to exit) are reported on their own rows.
 */
import { readLogs, type LoggedSample } from './eval-logs.js';
import { runCt, runInspect, type EvalRun } from './orchestrators.js';
import { rawSample } from './raw-docker.js';
import type { Row, System } from './report.js';
import { median, p95 } from './stats.js';
import { benchCalls } from './trajectory.js';
import type { BenchEnv, Workspace } from './workspace.js';

export const LATENCY_METRICS = [
  'sample wall (sandbox init to cleanup end), s',
  'sandbox init, s',
  'sandbox cleanup, s',
  'sandbox init + cleanup, s',
  'per-call median, ms',
  'per-call p95, ms',
  'exec (`echo`) median, ms',
] as const;
type Metric = (typeof LATENCY_METRICS)[number];

export const PROCESS_METRICS = ['start-up (process start to first sandbox init), s', 'wind-down (last sandbox cleanup to exit), s'] as const;
export const PROCESS_CONFIG = 'per process, over all latency runs';

/** One sample of one system. */
export interface LatencySample {
  system: System;
  env: string;
  n: number;
  sampleWallS: number;
  initS: number;
  cleanupS: number;
  callMs: number[];
}

/** One orchestrator process (R samples). */
export interface LatencyProcess {
  system: 'ct' | 'inspect';
  env: string;
  n: number;
  wallS: number;
  startupS: number;
  winddownS: number;
  cpuSeconds: number;
  logPath: string;
}

export interface LatencyOptions {
  ns: number[];
  reps: number;
  log: (line: string) => void;
}

export function latencyConfig(env: BenchEnv, n: number): string {
  return `${env.label}, N=${n}`;
}

type Parts = Pick<LatencySample, 'sampleWallS' | 'initS' | 'cleanupS' | 'callMs'>;

function fromCt(s: LoggedSample): Parts {
  if (s.sampleInitAt === null || s.completedAt === null || s.scoreAt === null || s.tools.length === 0) {
    throw new Error(`ct log lacks the events the bench reads (sample_init, tool, score) for ${s.id}`);
  }
  return {
    sampleWallS: s.completedAt - s.sampleInitAt,
    initS: s.tools[0]!.start - s.sampleInitAt,
    cleanupS: s.completedAt - s.scoreAt,
    callMs: s.tools.map((t) => t.seconds * 1000),
  };
}

function ctProcess(run: EvalRun, samples: LoggedSample[]): Pick<LatencyProcess, 'startupS' | 'winddownS'> {
  const first = Math.min(...samples.map((s) => s.sampleInitAt!));
  const last = Math.max(...samples.map((s) => s.completedAt!));
  return { startupS: first - run.child.startedAtMs / 1000, winddownS: run.child.endedAtMs / 1000 - last };
}

/** Inspect's samples ran one at a time: the k-th sandbox init and cleanup belong to one sample. */
function inspectParts(run: EvalRun, samples: LoggedSample[]): { parts: Parts[]; process: Pick<LatencyProcess, 'startupS' | 'winddownS'> } {
  const inits = (run.phases ?? []).filter((p) => p.phase === 'init').sort((a, b) => a.start - b.start);
  const cleanups = (run.phases ?? []).filter((p) => p.phase === 'cleanup').sort((a, b) => a.start - b.start);
  if (inits.length !== samples.length || cleanups.length !== samples.length || samples.some((s) => !s.callSeconds)) {
    throw new Error(`inspect run lacks phase or call timings (${inits.length} inits, ${cleanups.length} cleanups, ${samples.length} samples): ${run.logPath}`);
  }
  return {
    parts: samples.map((s, k) => ({
      sampleWallS: cleanups[k]!.end - inits[k]!.start,
      initS: inits[k]!.end - inits[k]!.start,
      cleanupS: cleanups[k]!.end - cleanups[k]!.start,
      callMs: s.callSeconds!.map((x) => x * 1000),
    })),
    process: { startupS: inits[0]!.start - run.child.startedAtMs / 1000, winddownS: run.child.endedAtMs / 1000 - cleanups.at(-1)!.end },
  };
}

export async function latencySection(
  ws: Workspace,
  opts: LatencyOptions,
): Promise<{ rows: Row[]; samples: LatencySample[]; processes: LatencyProcess[] }> {
  const samples: LatencySample[] = [];
  const processes: LatencyProcess[] = [];
  const pending: Array<{ system: 'ct' | 'inspect'; env: BenchEnv; n: number; run: EvalRun }> = [];
  const order: System[] = ['ct', 'inspect', 'raw'];
  let turn = 0;
  for (const env of ws.envs) {
    for (const n of opts.ns) {
      const traj = ws.trajectory(n);
      const calls = benchCalls(n);
      const systems = order.map((_, i) => order[(i + turn) % order.length]!);
      turn++;
      for (const system of systems) {
        if (system === 'raw') {
          for (let rep = 0; rep < opts.reps; rep++) {
            const r = await rawSample(env, calls);
            samples.push({ system, env: env.id, n, sampleWallS: r.totalMs / 1000, initS: r.initMs / 1000, cleanupS: r.cleanupMs / 1000, callMs: r.callMs });
          }
        } else {
          const spec = { env, trajectory: traj, samples: opts.reps, concurrency: 1, logDir: ws.logDir(`${system}-${env.id}-n${n}`) };
          pending.push({ system, env, n, run: system === 'ct' ? await runCt(ws, spec) : await runInspect(ws, spec) });
        }
        opts.log(`  latency ${latencyConfig(env, n)}: ${system} done`);
      }
    }
  }
  const logs = await readLogs(
    pending.map((p) => p.run.logPath),
    'full',
  );
  pending.forEach(({ system, env, n, run }, i) => {
    const logged = [...logs[i]!.samples].sort((a, b) => a.epoch - b.epoch);
    const bad = logged.filter((s) => s.error || !s.correct);
    if (logged.length !== opts.reps || bad.length) throw new Error(`${system}: ${bad.length} of ${logged.length} samples did not finish correctly: ${run.logPath}`);
    let parts: Parts[];
    let proc: Pick<LatencyProcess, 'startupS' | 'winddownS'>;
    if (system === 'ct') {
      parts = logged.map(fromCt);
      proc = ctProcess(run, logged);
    } else {
      ({ parts, process: proc } = inspectParts(run, logged));
    }
    for (const p of parts) samples.push({ system, env: env.id, n, ...p });
    processes.push({ system, env: env.id, n, wallS: run.child.wallMs / 1000, cpuSeconds: run.child.cpuSeconds, logPath: run.logPath, ...proc });
  });
  const rows: Row[] = [];
  for (const env of ws.envs) {
    for (const n of opts.ns) {
      const calls = benchCalls(n);
      const mine = samples.filter((r) => r.env === env.id && r.n === n);
      const execIdx = calls.map((c, i) => (c.kind === 'exec' ? i : -1)).filter((i) => i >= 0);
      const pick: Record<Metric, (r: LatencySample) => number> = {
        'sample wall (sandbox init to cleanup end), s': (r) => r.sampleWallS,
        'sandbox init, s': (r) => r.initS,
        'sandbox cleanup, s': (r) => r.cleanupS,
        'sandbox init + cleanup, s': (r) => r.initS + r.cleanupS,
        'per-call median, ms': (r) => median(r.callMs),
        'per-call p95, ms': (r) => p95(r.callMs),
        'exec (`echo`) median, ms': (r) => median(execIdx.map((i) => r.callMs[i]!)),
      };
      for (const metric of LATENCY_METRICS) {
        const values: Row['values'] = {};
        for (const s of order) values[s] = mine.filter((r) => r.system === s).map(pick[metric]);
        rows.push({ section: 'latency', config: latencyConfig(env, n), metric, values });
      }
    }
  }
  for (const metric of PROCESS_METRICS) {
    const f = metric === PROCESS_METRICS[0] ? (p: LatencyProcess) => p.startupS : (p: LatencyProcess) => p.winddownS;
    rows.push({
      section: 'latency',
      config: PROCESS_CONFIG,
      metric,
      values: { ct: processes.filter((p) => p.system === 'ct').map(f), inspect: processes.filter((p) => p.system === 'inspect').map(f) },
    });
  }
  return { rows, samples, processes };
}

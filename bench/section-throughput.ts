/**
 * Section 2: S samples of the N=20 trajectory at concurrency C, through ct (`--max-samples C`)
 * and Inspect (`--max-samples C --max-sandboxes C`), and the raw floor (S raw samples, C at a
 * time, from this process). Samples per minute count the whole run (process start to exit);
 * CPU is the orchestrator's process tree (for raw: this process and its docker CLI children).
 */
import { usageMark, usageSince } from './child-usage.js';
import { readLogs } from './eval-logs.js';
import { runCt, runInspect, type EvalRun } from './orchestrators.js';
import { rawSample } from './raw-docker.js';
import type { Row, System } from './report.js';
import { benchCalls } from './trajectory.js';
import type { Workspace } from './workspace.js';

export const THROUGHPUT_METRICS = [
  'samples per minute',
  'orchestrator CPU (user+sys), s',
  'Docker Engine CPU (dockerd+containerd), s',
] as const;

export interface ThroughputRun {
  system: System;
  concurrency: number;
  rep: number;
  samples: number;
  wallS: number;
  cpuSeconds: number;
  engineCpuSeconds: number;
}

export interface ThroughputOptions {
  concurrency: number[];
  samples: number;
  calls: number;
  reps: number;
  /** Also run the raw floor (S raw samples per concurrency). */
  raw: boolean;
  log: (line: string) => void;
}

export function throughputConfig(o: Pick<ThroughputOptions, 'samples' | 'calls'>, c: number): string {
  return `1 service, ${o.samples} samples × ${o.calls} calls, concurrency ${c}`;
}

/** Runs `count` raw samples, `concurrency` at a time; CPU of this process and its children. */
async function rawPool(ws: Workspace, count: number, concurrency: number, calls: number): Promise<Omit<ThroughputRun, 'system' | 'concurrency' | 'rep'>> {
  const env = ws.envs[0]!;
  const list = benchCalls(calls);
  const mark = usageMark();
  const t0 = performance.now();
  let started = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (started < count) {
        started++;
        await rawSample(env, list);
      }
    }),
  );
  const wallS = (performance.now() - t0) / 1000;
  const used = usageSince(mark);
  return { samples: count, wallS, cpuSeconds: used.children + used.self, engineCpuSeconds: used.engine };
}

export async function throughputSection(ws: Workspace, opts: ThroughputOptions): Promise<{ rows: Row[]; runs: ThroughputRun[] }> {
  const env = ws.envs[0]!;
  const traj = ws.trajectory(opts.calls);
  const runs: ThroughputRun[] = [];
  const pending: Array<{ system: 'ct' | 'inspect'; run: EvalRun }> = [];
  const systems: System[] = opts.raw ? ['ct', 'inspect', 'raw'] : ['ct', 'inspect'];
  for (const c of opts.concurrency) {
    for (let rep = 0; rep < opts.reps; rep++) {
      const order = systems.map((_, i) => systems[(i + rep + c) % systems.length]!);
      for (const system of order) {
        const spec = { env, trajectory: traj, samples: opts.samples, concurrency: c, logDir: ws.logDir(`tp-${system}-c${c}`) };
        if (system === 'raw') {
          runs.push({ system, concurrency: c, rep, ...(await rawPool(ws, opts.samples, c, opts.calls)) });
        } else {
          const run = system === 'ct' ? await runCt(ws, spec) : await runInspect(ws, spec);
          pending.push({ system, run });
          runs.push({
            system,
            concurrency: c,
            rep,
            samples: opts.samples,
            wallS: run.child.wallMs / 1000,
            cpuSeconds: run.child.cpuSeconds,
            engineCpuSeconds: run.child.engineCpuSeconds,
          });
        }
        opts.log(`  throughput c=${c} ${system}: ${runs.at(-1)!.wallS.toFixed(1)} s`);
      }
    }
  }
  const logs = await readLogs(
    pending.map((p) => p.run.logPath),
    'summary',
  );
  logs.forEach((l, i) => {
    const bad = l.samples.filter((s) => s.error || !s.correct);
    if (l.samples.length !== opts.samples || bad.length > 0) {
      throw new Error(`${pending[i]!.system} throughput run has ${l.samples.length} samples, ${bad.length} not correct: ${l.path}`);
    }
  });
  const rows: Row[] = [];
  for (const c of opts.concurrency) {
    const at = (s: System) => runs.filter((r) => r.system === s && r.concurrency === c);
    const col = (f: (r: ThroughputRun) => number): Row['values'] => Object.fromEntries(systems.map((s) => [s, at(s).map(f)]));
    const config = throughputConfig(opts, c);
    rows.push({ section: 'throughput', config, metric: THROUGHPUT_METRICS[0], values: col((r) => (60 * r.samples) / r.wallS) });
    rows.push({ section: 'throughput', config, metric: THROUGHPUT_METRICS[1], values: col((r) => r.cpuSeconds) });
    rows.push({ section: 'throughput', config, metric: THROUGHPUT_METRICS[2], values: col((r) => r.engineCpuSeconds) });
  }
  return { rows, runs };
}

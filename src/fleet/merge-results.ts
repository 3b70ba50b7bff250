/**
 * Turns a fleet's one-sample results into ONE `.eval` in the log dir, through the streaming log
 * merge (`log/eval-merge.ts`): each result's sample is copied as stored, a few results are
 * downloaded ahead, and only a small row per sample (for the summary printed at the end) is kept.
 *
 * The merged log is written to `<log_dir>/fleet/<fleet_id>/merging.eval` and renamed into the
 * log dir under the name every log gets (`evalLogFileName`, Inspect's `{created}_{task}_{id}`),
 * which the fleet fixes: its manifest's creation time and its task id. So a controller killed
 * while merging leaves no partial log in the log dir, and a resumed one replaces, never adds.
 *
 * A result that is not a readable log (damaged, over the archive caps, unsafe member names), or
 * not its job's (`resultMismatch`: another sample or epoch, more than one sample, another fleet's
 * header), is its job's failure, not the merge's: an error sample saying why takes its place, so
 * the job counts as failed (and a rerun retries it) while the other jobs merge.
 */
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { mergeEvalLogs } from '../log/eval-merge.js';
import { evalLogFileName } from '../log/eval-writer.js';
import { finalStatus } from '../log/final-status.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { EvalLog, EvalPlan, EvalSampleSummary, EvalSpec, EvalStatus } from '../log/types.js';
import { badResultSample, oneSampleLog, resultMismatch } from './one-sample-log.js';
import type { AnyJob, Job, Manifest } from './protocol.js';
import type { ResultStore } from './types.js';

/** Results downloaded ahead of the one being added. */
const PREFETCH = 8;

export interface MergedRow {
  jobId: string;
  id: string;
  epoch: number;
  scores?: Record<string, string>;
  error?: string;
  /** Dead-lettered: the job never produced a result of its own. */
  dead?: { attempts: number; workers: string[] };
  seconds: number;
}

export interface MergeOutcome {
  /** The merged log (a monitor fleet: the first of `paths`). */
  path: string;
  /** Every log written (a monitor fleet writes one per input). */
  paths?: string[];
  status: EvalStatus;
  header: EvalLog;
  rows: MergedRow[];
  /** Jobs with neither a result nor a failure record (the run is incomplete). */
  missing: string[];
}

export async function mergeFleetResults(o: {
  store: ResultStore;
  manifest: Manifest;
  header: { spec: EvalSpec; plan: EvalPlan };
  logDir: string;
}): Promise<MergeOutcome> {
  const { store, manifest, header } = o;
  const jobs = manifest.jobs;
  const workDir = join(o.logDir, 'fleet', manifest.fleet_id);
  await mkdir(workDir, { recursive: true });
  await rm(join(workDir, 'merging.eval'), { force: true });
  const rows: MergedRow[] = [];
  const missing: string[] = [];
  /** The jobs whose results are inputs, in input order. */
  const inputJobs: Job[] = [];
  const matched = new Set<number>();
  // The run's times are its samples' (first start, last end), however many controllers it took:
  // a resume that only merges does not make the run look 0.1 s long. Read when the merge finishes.
  const stats = { started_at: '', completed_at: '', connection_limit_history: [] as number[] };

  async function* results(): AsyncGenerator<Buffer> {
    const pending: Array<Promise<Uint8Array | undefined>> = [];
    const fetch = (i: number) => {
      const p = store.getResult(jobs[i]!.job_id);
      p.catch(() => undefined); // awaited in order below
      pending[i] = p;
    };
    for (let i = 0; i < Math.min(PREFETCH, jobs.length); i++) fetch(i);
    for (let i = 0; i < jobs.length; i++) {
      const bytes = await pending[i]!;
      delete pending[i];
      if (i + PREFETCH < jobs.length) fetch(i + PREFETCH);
      if (!bytes) {
        missing.push(jobs[i]!.job_id);
        continue;
      }
      inputJobs.push(jobs[i]!);
      // A view of the downloaded bytes, not a copy.
      yield Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
  }

  const merged = await mergeEvalLogs({
    logDir: workDir,
    fileName: 'merging.eval',
    spec: header.spec,
    plan: header.plan,
    inputs: results(),
    totalSamples: jobs.length,
    stats,
    status: 'success',
    checkInput: (got, index) => resultMismatch(inputJobs[index]!, header, got),
    onBadInput: async (error, index, source) => {
      // The merge names a result it was given as bytes `input #N`; the sample names its job instead.
      const reason = error.message.startsWith(`${source}: `) ? error.message.slice(source.length + 2) : error.message;
      return Buffer.from(await oneSampleLog(badResultSample(inputJobs[index]!, reason), header));
    },
    onSample: (summary, index) => {
      const job = inputJobs[index]!;
      // A result holds its job's sample only; anything else in it is not this run's.
      if (String(summary.id) !== job.sample_id || summary.epoch !== job.epoch || matched.has(index)) return false;
      matched.add(index);
      rows.push(rowOf(job, summary));
      if (summary.started_at && (!stats.started_at || summary.started_at < stats.started_at)) stats.started_at = summary.started_at;
      if (summary.completed_at && summary.completed_at > stats.completed_at) stats.completed_at = summary.completed_at;
      return true;
    },
    outcome: () => {
      stats.started_at ||= manifest.created;
      stats.completed_at ||= isoTimestamp();
      inputJobs.forEach((job, i) => {
        if (!matched.has(i)) missing.push(job.job_id);
      });
      return finalStatus({
        errors: rows.filter((r) => r.error).length,
        total: jobs.length,
        failOnError: header.spec.config.fail_on_error,
        ...(missing.length > 0 && { runError: `${missing.length} job(s) have no result` }),
      });
    },
  });
  const path = mergedLogPath(o.logDir, header);
  await rename(merged.path, path);
  return { path, status: merged.header.status, header: merged.header, rows, missing };
}

export function rowOf(job: AnyJob, summary: EvalSampleSummary): MergedRow {
  const score = summary.scores?.linux_scorer?.value as Record<string, string> | undefined;
  const meta = summary.metadata as { fleet_dead?: boolean; attempts?: number; workers?: string[] } | undefined;
  return {
    jobId: job.job_id,
    id: String(summary.id),
    epoch: summary.epoch,
    ...(score ? { scores: score } : {}),
    ...(summary.error ? { error: summary.error } : {}),
    ...(meta?.fleet_dead ? { dead: { attempts: meta.attempts ?? 0, workers: meta.workers ?? [] } } : {}),
    seconds: summary.total_time ?? 0,
  };
}

/** Where a fleet's merged log goes: a name fixed by the fleet (its manifest's creation time), so a resumed merge replaces it. */
export function mergedLogPath(logDir: string, header: { spec: EvalSpec }): string {
  return join(logDir, evalLogFileName(header.spec));
}

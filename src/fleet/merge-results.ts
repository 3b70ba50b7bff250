/**
 * Turns a fleet's one-sample results into ONE `.eval` in the log dir. Temporary: the streaming
 * log merge of `log/` replaces this once it exists; this one goes through `EvalLogWriter`, keeps
 * only each sample's scores and usage in memory, and downloads a few results ahead.
 *
 * The merged log is written to `<log_dir>/fleet/<fleet_id>/merging.eval` and renamed into the
 * log dir under a name fixed by the fleet (its manifest's creation time), so a controller killed
 * while merging leaves no partial log in the log dir, and a resumed one replaces, never adds.
 */
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { EvalLogWriter, evalLogFileName } from '../log/eval-writer.js';
import { computeEvalResults, totalModelUsage, type ScoredSample } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { EvalLog, EvalPlan, EvalSample, EvalSpec, EvalStatus, ModelUsage } from '../log/types.js';
import { sampleOfLog } from './one-sample-log.js';
import type { Job, Manifest } from './protocol.js';
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
  path: string;
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
  startedAt: string;
}): Promise<MergeOutcome> {
  const { store, manifest, header } = o;
  const workDir = join(o.logDir, 'fleet', manifest.fleet_id);
  await mkdir(workDir, { recursive: true });
  await rm(join(workDir, 'merging.eval'), { force: true });
  const writer = await EvalLogWriter.create({ logDir: workDir, spec: header.spec, plan: header.plan, fileName: 'merging.eval' });
  const scored: ScoredSample[] = [];
  const usage: Array<{ model_usage?: Record<string, ModelUsage>; role_usage?: Record<string, ModelUsage> }> = [];
  const rows: MergedRow[] = [];
  const missing: string[] = [];
  const fetchOne = async (job: Job): Promise<EvalSample | undefined> => {
    const bytes = await store.getResult(job.job_id);
    return bytes ? sampleOfLog(bytes, job) : undefined;
  };
  try {
    const pending: Array<Promise<EvalSample | undefined>> = [];
    const jobs = manifest.jobs;
    for (let i = 0; i < Math.min(PREFETCH, jobs.length); i++) pending.push(fetchOne(jobs[i]!));
    for (let i = 0; i < jobs.length; i++) {
      const sample = await pending[i]!;
      if (i + PREFETCH < jobs.length) pending.push(fetchOne(jobs[i + PREFETCH]!));
      pending[i] = Promise.resolve(undefined);
      const job = jobs[i]!;
      if (!sample) {
        missing.push(job.job_id);
        continue;
      }
      await writer.addSample(sample);
      scored.push({ id: sample.id, epoch: sample.epoch, ...(sample.scores ? { scores: sample.scores } : {}), ...(sample.error ? { error: sample.error.message } : {}) });
      usage.push({ model_usage: sample.model_usage, role_usage: sample.role_usage });
      const score = sample.scores?.linux_scorer?.value as Record<string, string> | undefined;
      const meta = sample.metadata as { fleet_dead?: boolean; attempts?: number; workers?: string[] } | undefined;
      rows.push({
        jobId: job.job_id,
        id: String(sample.id),
        epoch: sample.epoch,
        ...(score ? { scores: score } : {}),
        ...(sample.error ? { error: sample.error.message } : {}),
        ...(meta?.fleet_dead ? { dead: { attempts: meta.attempts ?? 0, workers: meta.workers ?? [] } } : {}),
        seconds: sample.total_time ?? 0,
      });
    }
  } catch (e) {
    await writer.close().catch(() => {});
    throw e;
  }
  const errors = rows.filter((r) => r.error).length;
  const status: EvalStatus = missing.length > 0 || errors > 0 ? 'error' : 'success';
  const { results, reductions } = computeEvalResults(scored, { totalSamples: manifest.jobs.length });
  const finished = await writer.finish({
    status,
    results,
    ...(reductions.length ? { reductions } : {}),
    stats: { started_at: o.startedAt, completed_at: isoTimestamp(), ...totalModelUsage(usage), connection_limit_history: [] },
    ...(missing.length
      ? { error: { message: `${missing.length} job(s) have no result`, traceback: '', traceback_ansi: '' } }
      : errors
        ? { error: { message: `${errors} sample(s) failed`, traceback: '', traceback_ansi: '' } }
        : {}),
  });
  const path = join(o.logDir, evalLogFileName(header.spec));
  await rename(writer.path, path);
  return { path, status, header: finished, rows, missing };
}

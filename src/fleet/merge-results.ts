/**
 * Turns a fleet's one-sample results into ONE `.eval` in the log dir. Temporary: the streaming
 * log merge of `log/` replaces this once it exists; this one goes through `EvalLogWriter`, keeps
 * only each sample's scores and usage in memory, and downloads a few results ahead.
 *
 * The merged log is written to `<log_dir>/fleet/<fleet_id>/merging.eval` and renamed into the
 * log dir under a name fixed by the fleet (its manifest's creation time), so a controller killed
 * while merging leaves no partial log in the log dir, and a resumed one replaces, never adds.
 */
import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { readEvalLog } from '../log/eval-reader.js';
import { EvalLogWriter, evalLogFileName } from '../log/eval-writer.js';
import { computeEvalResults, totalModelUsage, type ScoredSample } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { EvalLog, EvalSample, EvalStatus, ModelUsage } from '../log/types.js';
import type { FailureRecord, FleetIo } from './fleet-io.js';
import type { Job } from './protocol.js';
import { fleetEvalPlan, fleetEvalSpec, type RunManifest } from './run-manifest.js';

/** Results downloaded ahead of the one being added. */
const PREFETCH = 8;

export interface MergedRow {
  jobId: string;
  id: string;
  epoch: number;
  scores?: Record<string, string>;
  error?: string;
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
  io: FleetIo;
  manifest: RunManifest;
  logDir: string;
  version: string;
  startedAt: string;
  /** Jobs with a failure record, by job id. */
  failed: Set<string>;
}): Promise<MergeOutcome> {
  const { io, manifest } = o;
  const spec = fleetEvalSpec(manifest, { version: o.version, created: manifest.created });
  const workDir = join(o.logDir, 'fleet', manifest.fleet_id);
  await mkdir(workDir, { recursive: true });
  await rm(join(workDir, 'merging.eval'), { force: true });
  const writer = await EvalLogWriter.create({ logDir: workDir, spec, plan: fleetEvalPlan(manifest), fileName: 'merging.eval' });
  const scratch = await mkdtemp(join(tmpdir(), 'ct-merge-'));
  const scored: ScoredSample[] = [];
  const usage: Array<{ model_usage?: Record<string, ModelUsage>; role_usage?: Record<string, ModelUsage> }> = [];
  const rows: MergedRow[] = [];
  const missing: string[] = [];
  const fetchOne = async (job: Job): Promise<EvalSample | undefined> => {
    const bytes = await io.store.get(io.names.resultKey(job.job_id));
    if (bytes) {
      const file = join(scratch, `${job.job_id}.eval`);
      await writeFile(file, bytes);
      const log = await readEvalLog(file);
      await rm(file, { force: true });
      const sample = log.samples?.find((s) => String(s.id) === job.sample_id && s.epoch === job.epoch);
      if (!sample) throw new Error(`the result of job ${job.job_id} holds no sample ${job.sample_id} epoch ${job.epoch}`);
      return sample;
    }
    if (o.failed.has(job.job_id)) {
      const f = await io.readFailure(job.job_id);
      return errorSample(job, f ?? { job_id: job.job_id, error: 'no worker reported why', attempts: 0, workers: [] });
    }
    return undefined;
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
      rows.push({ jobId: job.job_id, id: String(sample.id), epoch: sample.epoch, ...(score ? { scores: score } : {}), ...(sample.error ? { error: sample.error.message } : {}), seconds: sample.total_time ?? 0 });
    }
  } catch (e) {
    await writer.close().catch(() => {});
    throw e;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  const errors = rows.filter((r) => r.error).length;
  const status: EvalStatus = missing.length > 0 || errors > 0 ? 'error' : 'success';
  const { results, reductions } = computeEvalResults(scored, { totalSamples: manifest.jobs.length });
  const header = await writer.finish({
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
  const path = join(o.logDir, evalLogFileName(spec));
  await rename(writer.path, path);
  return { path, status, header, rows, missing };
}

/** The log's record of a job that never produced a result: the attempts and the workers that made them. */
function errorSample(job: Job, f: FailureRecord): EvalSample {
  const now = new Date().toISOString();
  const who = f.workers.length ? ` on ${[...new Set(f.workers)].join(', ')}` : '';
  const message = `the job failed on all ${f.attempts} attempt(s)${who}; last error: ${f.error}`;
  return {
    id: job.sample_id,
    epoch: job.epoch,
    input: '',
    target: '',
    messages: [],
    output: { model: 'none', choices: [], completion: '' },
    metadata: { environment: job.env, setting: job.setting, main_task: job.main_task, side_task: job.side_task ?? null, fleet_job_id: job.job_id, attempts: f.attempts, workers: f.workers },
    store: {},
    events: [],
    model_usage: {},
    role_usage: {},
    started_at: now,
    completed_at: now,
    total_time: 0,
    working_time: 0,
    error: { message, traceback: message, traceback_ansi: message },
    attachments: {},
  };
}

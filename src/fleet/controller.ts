/**
 * The fleet controller: the user's `ct run eval --fleet`. In two steps, so nothing is created
 * before the user agreed:
 *
 *   inspectFleet   read-only: the fleet's existing manifest (same jobs? same protocol?) and the
 *                  jobs already finished (a result, or a failure record) — for the estimate.
 *   runFleet       uploads the manifest, creates the queues (work -> DLQ after
 *                  max_receive_count), enqueues the unfinished jobs, starts workers, follows the
 *                  done queue until every job is finished, merges the results into ONE .eval,
 *                  deletes the queues it created and stops its workers.
 *
 * Everything needed to go on lives in SQS and S3, so a controller that crashed or was stopped
 * is resumed by running the same command again: the fleet id is the same, finished jobs are
 * found in S3 and only the rest is queued. A job is finished when its result is in S3, or when
 * SQS dead-lettered it: the controller then writes a failure record (error, attempts, workers)
 * next to the results, and the merged log has an error sample for it.
 */
import { errorMessage } from '../errors.js';
import { sleep } from '../host/backoff.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { FleetEventsLog } from './events-log.js';
import type { FailureRecord, FleetIo, FleetQueues } from './fleet-io.js';
import type { FleetProgress } from './fleet-progress.js';
import type { WorkerLauncher } from './launcher.js';
import { mergeFleetResults, type MergeOutcome } from './merge-results.js';
import { PROTOCOL_VERSION, doneMessageSchema, jobMessageSchema, manifestSchema } from './protocol.js';
import type { RunManifest } from './run-manifest.js';
import { ConfigError } from '../errors.js';

export interface FleetTimings {
  visibilityTimeout: number;
  maxReceiveCount: number;
  pollSeconds: number;
  checkSeconds: number;
  staleWarningMinutes: number;
  staleTeardownMinutes: number;
}

/** What is already there for this fleet. */
export interface FleetState {
  /** The bucket holds this fleet's manifest (a resume). */
  exists: boolean;
  results: Set<string>;
  failed: Set<string>;
}

/**
 * Reads, never writes: refuses a fleet id whose manifest speaks another protocol version or
 * lists other jobs, and counts the jobs already finished.
 */
export async function inspectFleet(io: FleetIo, manifest: RunManifest): Promise<FleetState> {
  const bytes = await io.store.get(io.names.manifestKey).catch((e) => {
    if (/NoSuchBucket|does not exist/i.test(errorMessage(e))) return undefined;
    throw e;
  });
  if (!bytes) return { exists: false, results: new Set(), failed: new Set() };
  const where = `s3://${io.bucket}/${io.names.manifestKey}`;
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ConfigError(`${where} is not JSON; start a new fleet with --new-fleet`);
  }
  const version = (raw as { version?: unknown } | null)?.version;
  if (version !== PROTOCOL_VERSION) {
    throw new ConfigError(
      `fleet ${io.fleetId} was started by a ct speaking protocol version ${JSON.stringify(version)}; this ct speaks ${PROTOCOL_VERSION}. ` +
        'Finish it with that ct version, or start over with --new-fleet',
    );
  }
  const prior = manifestSchema.safeParse(raw);
  const ids = new Set(manifest.jobs.map((j) => j.job_id));
  if (!prior.success || prior.data.jobs.length !== ids.size || !prior.data.jobs.every((j) => ids.has(j.job_id))) {
    throw new ConfigError(`${where} describes other jobs than this run; start a new fleet with --new-fleet`);
  }
  const [results, failed] = await Promise.all([io.store.completedJobIds(), io.failedJobIds()]);
  return { exists: true, results: keep(results, ids), failed: keep(failed, ids) };
}

export interface RunFleetOptions {
  io: FleetIo;
  manifest: RunManifest;
  state: FleetState;
  launcher: WorkerLauncher;
  /** Workers started at first (and kept up to while work remains). */
  workers: number;
  timings: FleetTimings;
  logDir: string;
  version: string;
  events: FleetEventsLog;
  progress: FleetProgress;
  /** USD per worker-hour (0 for local and external workers). */
  pricePerWorkerHour: number;
  /** The command that resumes this fleet, for messages. */
  resumeCommand: string;
  /** First Ctrl-C / SIGTERM: stop tracking, keep the fleet for a resume. */
  signal: AbortSignal;
}

/**
 * How a run ended: `complete` (every job finished, log merged, queues deleted), `stale` (no
 * progress for stale_teardown_minutes: workers stopped, results kept), `stopped` (signal).
 */
export type FleetEnd = 'complete' | 'stale' | 'stopped';

export interface RunFleetResult {
  end: FleetEnd;
  enqueued: number;
  launched: string[];
  failures: FailureRecord[];
  merge?: MergeOutcome;
}

/** Workers started over the run, at most this many times the first launch (a fleet whose workers keep dying stops). */
const MAX_RELAUNCH_FACTOR = 3;
/** How long workers get to leave after the queues are deleted, before they are stopped (ms). */
const WORKER_EXIT_GRACE_MS = 30_000;

export async function runFleet(o: RunFleetOptions): Promise<RunFleetResult> {
  const { io, manifest, events, progress } = o;
  const startedAt = isoTimestamp();
  const ids = new Set(manifest.jobs.map((j) => j.job_id));
  const results = new Set(o.state.results);
  const failed = new Set(o.state.failed);
  const finished = () => new Set([...results, ...failed]).size;
  const attempts = new Map<string, { workers: string[]; error: string; attempts: number }>();
  const failures: FailureRecord[] = [];
  const launched: string[] = [];
  const seenUnreadable = new Set<string>();

  await io.store.ensureBucket();
  if (!o.state.exists) {
    await io.putOnce(io.names.manifestKey, JSON.stringify(manifest, null, 2), 'application/json');
    events.add('start', { fleet_id: manifest.fleet_id, jobs: manifest.jobs.length });
  } else {
    events.add('resume', { fleet_id: manifest.fleet_id, jobs: manifest.jobs.length, finished: finished() });
    progress.note(`resuming fleet ${manifest.fleet_id}: ${finished()} of ${ids.size} job(s) already finished`);
  }
  const queues = await io.store.ensureQueues({ visibilityTimeout: o.timings.visibilityTimeout, maxReceiveCount: o.timings.maxReceiveCount });

  // Only jobs with no result and no failure record. A job an earlier controller queued may be
  // queued twice now: a worker skips a job whose result exists, and results are keyed by job.
  const remaining = manifest.jobs.filter((j) => !results.has(j.job_id) && !failed.has(j.job_id));
  await io.store.sendAll(
    queues.work,
    remaining.map((job) => JSON.stringify({ version: PROTOCOL_VERSION, fleet_id: manifest.fleet_id, job })),
  );
  events.add('enqueue', { jobs: remaining.length });
  if (remaining.length > 0) {
    const n = Math.min(o.workers, remaining.length);
    if (n > 0) launched.push(...(await o.launcher.launch(n)));
    if (launched.length) events.add('launch', { workers: launched, kind: o.launcher.kind });
    progress.note(`fleet ${manifest.fleet_id}: ${remaining.length} job(s) queued, ${launched.length} ${o.launcher.kind} worker(s) started`);
    if (o.launcher.kind === 'external') progress.note(`start workers on your machines with:\n  ${o.launcher.workerCommand()}`);
  }
  const launchBudget = Math.max(1, launched.length) * MAX_RELAUNCH_FACTOR;

  let end: FleetEnd = 'complete';
  let lastProgress = Date.now();
  let lastFinished = finished();
  let warnedAt = 0;
  let workerStart = Date.now();
  let workerSeconds = 0;
  let liveWorkers: number | undefined = launched.length;
  let inFlight = 0;
  const show = () =>
    progress.update({
      total: ids.size,
      done: finished(),
      failed: failed.size,
      inFlight,
      workers: liveWorkers,
      cost: ((workerSeconds + (liveWorkers ?? 0) * (Date.now() - workerStart) / 1000) * o.pricePerWorkerHour) / 3600,
    });
  show();

  let nextCheck = 0;
  while (finished() < ids.size) {
    if (o.signal.aborted) {
      end = 'stopped';
      break;
    }
    const messages = await io.store.receive(queues.done, { max: 10, waitSeconds: o.timings.pollSeconds });
    for (const m of messages) {
      const parsed = doneMessageSchema.safeParse(safeJson(m.body));
      if (parsed.success && parsed.data.fleet_id === manifest.fleet_id && ids.has(parsed.data.job_id)) {
        const d = parsed.data;
        if (d.status === 'ok') {
          markDone(d.job_id, { worker: d.worker, attempt: d.attempt, seconds: d.seconds });
        } else {
          const a = attempts.get(d.job_id) ?? { workers: [], error: '', attempts: 0 };
          a.workers.push(d.worker);
          a.error = d.error ?? 'no error given';
          a.attempts = Math.max(a.attempts, d.attempt);
          attempts.set(d.job_id, a);
          events.add('job_failed', { job_id: d.job_id, worker: d.worker, attempt: d.attempt, error: a.error });
          events.add('job_requeued', { job_id: d.job_id, attempt: d.attempt });
          progress.note(`job ${d.job_id} failed on attempt ${d.attempt} (${d.worker}): ${a.error.split('\n')[0]}`);
        }
      }
      await io.store.delete(queues.done, m.receiptHandle);
    }
    if (Date.now() >= nextCheck || messages.length === 0) {
      nextCheck = Date.now() + o.timings.checkSeconds * 1000;
      await drainDeadLetters(queues);
      // Results whose done message never came (a worker died between upload and send).
      for (const id of await io.store.completedJobIds()) if (ids.has(id)) markDone(id, { seen: 'in S3 before its done message' });
      const depth = await io.store.depth(queues.work);
      inFlight = depth.inFlight;
      const live = await o.launcher.live();
      if (live !== undefined && liveWorkers !== undefined && live.length < liveWorkers) {
        workerSeconds += liveWorkers * ((Date.now() - workerStart) / 1000);
        workerStart = Date.now();
      }
      liveWorkers = live?.length;
      if (live !== undefined && live.length === 0 && finished() < ids.size) await replaceWorkers();
      if (finished() !== lastFinished) {
        lastFinished = finished();
        lastProgress = Date.now();
      } else if (checkStale()) {
        end = 'stale';
        break;
      }
    }
    show();
  }

  const result: RunFleetResult = { end, enqueued: remaining.length, launched, failures };
  if (end !== 'complete') {
    await o.launcher.stopAll(5_000);
    events.add('stopped', { reason: end, finished: finished(), jobs: ids.size });
    progress.stop();
    return result;
  }
  result.merge = await mergeFleetResults({ io, manifest, logDir: o.logDir, version: o.version, startedAt, failed });
  events.add('merge', { path: result.merge.path, samples: result.merge.rows.length });
  // Results stay in S3; the queues go. Workers see their queue gone and leave by themselves.
  await io.store.deleteQueues();
  await waitForWorkers();
  events.add('teardown', { queues: [io.names.workQueue, io.names.doneQueue, io.names.deadLetterQueue] });
  progress.stop();
  for (const id of failed) if (!failures.some((f) => f.job_id === id)) failures.push((await io.readFailure(id)) ?? { job_id: id, error: 'unknown', attempts: 0, workers: [] });
  return result;

  function markDone(jobId: string, fields: Record<string, unknown>): void {
    if (results.has(jobId)) return;
    results.add(jobId);
    events.add('job_done', { job_id: jobId, ...fields });
  }

  /** Jobs SQS gave up on: a failure record each (first writer wins), an event, a note. */
  async function drainDeadLetters(q: FleetQueues): Promise<void> {
    for (;;) {
      // Unreadable messages stay in the DLQ; a long visibility keeps them out of the next receives.
      const dead = await io.store.receive(q.deadLetter, { max: 10, waitSeconds: 0, visibilityTimeout: 43_200 });
      if (dead.length === 0) return;
      for (const m of dead) {
        const parsed = jobMessageSchema.safeParse(safeJson(m.body));
        const job = parsed.success && parsed.data.fleet_id === manifest.fleet_id && ids.has(parsed.data.job.job_id) ? parsed.data.job : undefined;
        if (!job) {
          if (!seenUnreadable.has(m.messageId)) {
            seenUnreadable.add(m.messageId);
            events.add('unreadable_message', { message_id: m.messageId, body: m.body.slice(0, 500) });
            progress.note(`a message the workers could not read was dead-lettered (never run): ${m.body.slice(0, 120)}`);
          }
          continue;
        }
        if (!results.has(job.job_id) && !failed.has(job.job_id) && !(await io.has(io.names.resultKey(job.job_id)))) {
          const a = attempts.get(job.job_id);
          const record: FailureRecord = {
            job_id: job.job_id,
            error: a?.error || 'no worker reported why (workers died or stopped while running it)',
            attempts: Math.max(a?.attempts ?? 0, m.receiveCount > 1 ? m.receiveCount - 1 : 0, o.timings.maxReceiveCount),
            workers: a?.workers ?? [],
          };
          await io.putOnce(io.failureKey(job.job_id), JSON.stringify(record), 'application/json');
          failed.add(job.job_id);
          failures.push(record);
          events.add('job_dead', { ...record });
          progress.note(`job ${job.job_id} failed for good after ${record.attempts} attempt(s): ${record.error.split('\n')[0]}`);
        }
        await io.store.delete(q.deadLetter, m.receiptHandle);
      }
    }
  }

  /** No worker is left while jobs remain: start replacements, within the launch budget. */
  async function replaceWorkers(): Promise<void> {
    const left = ids.size - finished();
    if (launched.length >= launchBudget) return;
    const n = Math.min(o.workers, left, launchBudget - launched.length);
    const names = await o.launcher.launch(n);
    if (names.length === 0) return;
    launched.push(...names);
    liveWorkers = names.length;
    workerStart = Date.now();
    events.add('replace', { workers: names, left });
    progress.note(`no worker is running and ${left} job(s) remain: started ${names.length} replacement worker(s)`);
  }

  /** Warns after stale_warning_minutes without a finished job; true after stale_teardown_minutes. */
  function checkStale(): boolean {
    const idle = Date.now() - lastProgress;
    const mins = (ms: number) => Math.round((ms / 60_000) * 10) / 10;
    if (idle >= o.timings.staleTeardownMinutes * 60_000) {
      const text = `no job finished for ${mins(idle)} min: the fleet was stopped; results are kept. Resume with:\n  ${o.resumeCommand}`;
      events.add('warning', { kind: 'stale_teardown', idle_minutes: mins(idle) });
      progress.note(text);
      return true;
    }
    if (idle >= o.timings.staleWarningMinutes * 60_000 && Date.now() - warnedAt >= o.timings.staleWarningMinutes * 60_000) {
      warnedAt = Date.now();
      events.add('warning', { kind: 'stale', idle_minutes: mins(idle), left: ids.size - finished() });
      progress.note(`warning: no job finished for ${mins(idle)} min (${ids.size - finished()} left); see the worker logs in ${o.logDir}/fleet/${manifest.fleet_id}/`);
    }
    return false;
  }

  async function waitForWorkers(): Promise<void> {
    const deadline = Date.now() + Math.max(WORKER_EXIT_GRACE_MS, (o.timings.pollSeconds + 5) * 1000);
    while (Date.now() < deadline) {
      const live = await o.launcher.live();
      if (!live || live.length === 0) return;
      await sleep(250);
    }
    await o.launcher.stopAll(5_000);
  }
}

function keep(set: Set<string>, ids: Set<string>): Set<string> {
  return new Set([...set].filter((x) => ids.has(x)));
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

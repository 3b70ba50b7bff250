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
 * found in S3, and the queue ledger says whether the unfinished ones still have their messages
 * (then nothing is queued again) or may not (then they are queued under a new generation and
 * workers drop the older messages unrun): see `queueUnfinished`. A job is finished when its
 * result is stored. When a job is dead-lettered, the controller stores its result itself: a
 * sample whose error names the attempts, the workers and the last error — so the merged log has
 * it. Error results are marked (`errors/`), and a rerun retries them unless told not to.
 */
import { errorExcerpt } from '../eval/error-excerpt.js';
import { CloudError, ConfigError, errorMessage, isRetryable } from '../errors.js';
import { backoffDelays, sleep } from '../host/backoff.js';
import type { FleetEventsLog } from './events-log.js';
import type { FleetProgress } from './fleet-progress.js';
import type { FleetLauncher } from './launcher.js';
import { mergeFleetResults, type MergeOutcome } from './merge-results.js';
import { deadJobSample, fleetLogHeader, oneSampleLog, type DeadJob } from './one-sample-log.js';
import { REJECTED_EXCERPT_CHARS, isMonitorManifest, jobMismatch, parseMessage, rejectedMessageSchema, type AnyJob, type AnyManifest, type ErrorMarker, type Manifest, type ParsedJobMessage } from './protocol.js';
import { queueUnfinished } from './queue-ledger.js';
import { scaleUp } from './scaling.js';
import { Watchdog } from './watchdog.js';
import { backstopReceiveCount, type Delivery, type JobQueue, type ResultStore } from './types.js';

export interface FleetTimings {
  visibilityTimeout: number;
  /** ct's attempt limit (fleet.max_receive_count); SQS's redrive is set above it as a backstop. */
  maxAttempts: number;
  pollSeconds: number;
  checkSeconds: number;
  staleWarningMinutes: number;
  staleTeardownMinutes: number;
}

/** What is already there for this fleet. */
export interface FleetState {
  /** The bucket holds this fleet's manifest (a resume); its `created` names the merged log. */
  prior?: AnyManifest;
  /** Jobs with a stored result (dead-lettered ones included). */
  done: Set<string>;
  /** Jobs whose stored result is an error (dead-lettered, or the sample ended in error): what a rerun retries. */
  errors: Array<{ jobId: string; kind: ErrorMarker['kind'] }>;
}

/** Nothing there yet (a new fleet, or `--new-fleet`). */
export function emptyFleetState(): FleetState {
  return { done: new Set(), errors: [] };
}

/**
 * Reads, never writes: refuses a fleet id whose manifest speaks another protocol version (the
 * store's ConfigError) or lists other jobs, and finds the jobs already finished.
 */
export async function inspectFleet(store: ResultStore, manifest: AnyManifest): Promise<FleetState> {
  let prior: AnyManifest | undefined;
  try {
    prior = await store.getManifest();
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    if (/NoSuchBucket/.test(String((e as { code?: string }).code ?? '') + String((e as Error).message))) return emptyFleetState();
    throw e;
  }
  if (!prior) return emptyFleetState();
  const ids = new Set(manifest.jobs.map((j) => j.job_id));
  if ((prior.kind ?? 'eval') !== (manifest.kind ?? 'eval') || prior.jobs.length !== ids.size || !prior.jobs.every((j) => ids.has(j.job_id))) {
    throw new ConfigError(`the manifest of fleet ${manifest.fleet_id} describes other jobs than this run; start a new fleet with --new-fleet`);
  }
  const done = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await store.listResultIds(cursor ? { cursor } : {});
    for (const id of page.ids) if (ids.has(id)) done.add(id);
    cursor = page.cursor;
  } while (cursor);
  // A marker whose result is gone (a retry stopped half way) is not an error result: the job is simply unfinished.
  const errors = (await store.listErrorMarkers()).filter((m) => done.has(m.jobId));
  return { prior, done, errors };
}

/**
 * What a fleet's results become, by kind: an eval fleet's are merged into ONE log
 * (`evalFleetResults`); a monitor fleet's into a monitored copy of each input log.
 */
export interface FleetResults {
  /** The result the controller stores for a job SQS dead-lettered (its attempts spent). */
  deadResult(d: DeadJob): Promise<Uint8Array>;
  /** Turns the stored results into the run's log(s), once every job is finished. */
  merge(): Promise<MergeOutcome>;
}

/** An eval fleet's results: a dead job's result is a sample carrying the failure; all merge into one log. */
export function evalFleetResults(o: { store: ResultStore; manifest: Manifest; version: string; logDir: string }): FleetResults {
  const header = fleetLogHeader(o.manifest, o.version);
  return {
    deadResult: (d) => oneSampleLog(deadJobSample(d), header),
    merge: () => mergeFleetResults({ store: o.store, manifest: o.manifest, header, logDir: o.logDir }),
  };
}

export interface RunFleetOptions {
  queue: JobQueue;
  store: ResultStore;
  /** Creates the bucket when missing (S3); before anything else is written. */
  ensureBucket?: () => Promise<void>;
  manifest: AnyManifest;
  /** Default (eval fleets): `evalFleetResults`. Required for a monitor fleet. */
  results?: FleetResults;
  state: FleetState;
  launcher: FleetLauncher;
  /** Workers started at first (and kept up to while work remains). */
  workers: number;
  /**
   * Grow the fleet with its backlog (EC2): more workers while the queued jobs exceed what the live
   * ones finish in `waves` waves and they are all busy (`scaleUp`), at most `maxWorkers` live.
   * Absent: the fleet keeps the workers it started, replacing dead ones.
   */
  scale?: { maxWorkers: number; waves: number };
  timings: FleetTimings;
  logDir: string;
  version: string;
  events: FleetEventsLog;
  progress: FleetProgress;
  /** USD per worker-hour (0 for local and external workers). */
  pricePerWorkerHour: number;
  /** Queue the jobs whose result is an error again (default true; `--no-retry-errors`). */
  retryErrors?: boolean;
  /** Workers the launcher already started, ahead of the setup (local ones boot while the queues are made). */
  launchedEarly?: number;
  /** The command that resumes this fleet, for messages. */
  resumeCommand: string;
  /** First Ctrl-C / SIGTERM: stop tracking, keep the fleet for a resume. */
  signal: AbortSignal;
}

/**
 * How a run ended: `complete` (every job finished, log merged, queues deleted), `stale` (no
 * progress for stale_teardown_minutes: workers stopped, results kept), `stopped` (signal).
 */
export type FleetEnd = 'complete' | 'stale' | 'stopped' | 'workers-failed';

export interface RunFleetResult {
  end: FleetEnd;
  enqueued: number;
  /** Error results queued again by this run. */
  retried: number;
  launched: string[];
  /** Worker-hours the launcher's workers ran during this run (instance-hours on EC2). */
  workerHours: number;
  /** Jobs dead-lettered during this run. */
  dead: DeadJob[];
  /** Work messages refused unrun (forged, damaged, too large, not a job of the manifest), as found on the DLQ during this run. */
  rejected: RejectedReport[];
  merge?: MergeOutcome;
}

/** A work message no worker ran, and why (reported by the controller; the fleet goes on without it). */
export interface RejectedReport {
  /** The refused message's SQS id. */
  message_id: string;
  reason: string;
  /** The job id it named, if any: no result is ever stored for it on this message's account. */
  job_id?: string;
  /** The worker that refused it (absent: SQS's backstop moved it). */
  worker?: string;
  bytes: number;
  /** The body's first characters. */
  excerpt: string;
}

/** Workers started over the run, at most this many times the first launch (a fleet whose workers keep dying stops). */
const MAX_RELAUNCH_FACTOR = 3;
/**
 * Checks between listings of the fleet's results when the queues' counts say no report is
 * missing (see `track`): with the default check_seconds, every 5 minutes.
 */
const LIST_EVERY_CHECKS = 10;
/** After a launch for growth failed (not a refusal), the fleet tries to grow again this much later (5 min). */
const GROWTH_PAUSE_MS = 5 * 60_000;
/** How long EC2 workers get to leave after the queues are deleted, before they are terminated (ms). */
const WORKER_EXIT_GRACE_MS = 30_000;
/**
 * Tries of one controller step (creating the queues, enqueueing, one round of tracking, the
 * merge) when AWS said try again after the SDK's own 5 attempts: 6, waiting about 1, 2, 4, 8 and
 * 16 s between them. Every step is safe to repeat: results are first-writer-wins, a job finished
 * twice is counted once, and re-created queues are reconciled.
 */
const STEP_TRIES = 6;
/**
 * Answers to a delete of a done or dead message that only mean the message is no longer ours:
 * SQS offers it again and it is counted once, so the controller goes on.
 */
const STALE_HANDLE = new Set(['ReceiptHandleIsInvalid', 'MessageNotInflight']);

export async function runFleet(o: RunFleetOptions): Promise<RunFleetResult> {
  const { queue, store, manifest, events, progress } = o;
  const ids = new Set(manifest.jobs.map((j) => j.job_id));
  const jobsById = new Map(manifest.jobs.map((j) => [j.job_id, j]));
  const done = new Set(o.state.done);
  const attempts = new Map<string, { workers: string[]; error: string; attempts: number }>();
  const dead: DeadJob[] = [];
  const seenUnreadable = new Set<string>();
  const rejected: RejectedReport[] = [];
  const seenDone = new Set<string>();
  /** Workers that reported, by name, with when (external fleets show how many are at work). */
  const reporters = new Map<string, number>();
  if (!o.results && isMonitorManifest(manifest)) throw new Error('runFleet: a monitor fleet needs its results handler');
  const results = o.results ?? evalFleetResults({ store, manifest: manifest as Manifest, version: o.version, logDir: o.logDir });
  const retry = o.retryErrors === false ? [] : o.state.errors.filter((e) => done.has(e.jobId));
  const retryIds = new Set(retry.map((r) => r.jobId));
  // Dead-lettered results from earlier runs that stay (not retried) still count as failed.
  const deadBefore = o.state.errors.filter((e) => e.kind === 'dead' && !retryIds.has(e.jobId)).length;

  await o.ensureBucket?.();
  if (!o.state.prior) {
    await store.putManifest(manifest);
    events.add('start', { fleet_id: manifest.fleet_id, jobs: manifest.jobs.length });
  } else {
    events.add('resume', { fleet_id: manifest.fleet_id, jobs: manifest.jobs.length, finished: done.size, retried: retry.length });
    progress.note(
      `resuming fleet ${manifest.fleet_id}: ${done.size} of ${ids.size} job(s) already finished` +
        (retry.length ? `; ${retry.length} error result(s) queued again (--no-retry-errors keeps them)` : o.state.errors.length ? `; ${o.state.errors.length} error result(s) kept` : ''),
    );
  }
  const remaining = manifest.jobs.filter((j) => !done.has(j.job_id) || retryIds.has(j.job_id));
  // With every job finished there is nothing to queue: no queue is created, only the merge is
  // redone. (SQS refuses a queue name deleted less than 60 s ago, so re-creating the queues of a
  // fleet that just finished would fail on AWS.)
  let sent = 0;
  if (remaining.length > 0) {
    const created = await step('creating the queues', () =>
      queue.create({ visibilityTimeoutSeconds: o.timings.visibilityTimeout, maxReceiveCount: backstopReceiveCount(o.timings.maxAttempts) }),
    );
    if (created.reconciled.length) {
      events.add('warning', { kind: 'queue_attributes_reconciled', changes: created.reconciled });
      progress.note(`queue settings changed since the fleet started; updated: ${created.reconciled.join(', ')}`);
    }
    sent = await queueUnfinished({ store, queue, manifest, done, retry, queueId: created.queueId, events, step });
  }
  events.add('enqueue', { jobs: sent });
  for (const id of retryIds) done.delete(id);
  let launched = 0;
  if (remaining.length > 0) {
    launched = o.launchedEarly ?? (await o.launcher.start(Math.min(o.workers, remaining.length)));
    if (launched) events.add('launch', { workers: o.launcher.names(), kind: o.launcher.kind });
    const already = remaining.length - sent;
    progress.note(
      `fleet ${manifest.fleet_id}: ${sent} job(s) queued${already > 0 ? `, ${already} still queued from before` : ''}, ${launched} ${o.launcher.kind} worker(s) started`,
    );
    if (o.launcher.kind === 'external') progress.note(`start workers on your machines with:\n  ${o.launcher.workerCommand()}`);
  }
  // Launches allowed in all: MAX_RELAUNCH_FACTOR times the workers wanted (the first launch, plus
  // each growth, never counted past --max-workers); replacements of dead workers spend it, growth
  // raises it. Workers that keep dying thus stop the fleet however it grew.
  let launchBase = launched;
  const launchBudget = () => Math.max(1, Math.min(launchBase, o.scale?.maxWorkers ?? Infinity)) * MAX_RELAUNCH_FACTOR;
  /** Each worker's latest reported samples at once (`concurrency` done messages), by name. */
  const slots = new Map<string, number>();
  let growthPausedUntil = 0;

  let end: FleetEnd = 'complete';
  const watchdog = new Watchdog({
    warningMinutes: o.timings.staleWarningMinutes,
    teardownMinutes: o.timings.staleTeardownMinutes,
    onWarning: (idle) => {
      events.add('warning', { kind: 'stale', idle_minutes: idle, left: ids.size - done.size });
      progress.note(`warning: no job finished for ${idle} min (${ids.size - done.size} left); see the worker logs in ${o.logDir}/fleet/${manifest.fleet_id}/`);
    },
    onTeardown: (idle) => {
      events.add('warning', { kind: 'stale_teardown', idle_minutes: idle });
      progress.note(`no job finished for ${idle} min: the fleet was stopped; results are kept. Resume with:\n  ${o.resumeCommand}`);
    },
  });
  watchdog.check(done.size);
  let workerStart = Date.now();
  let workerSeconds = 0;
  let liveWorkers: number | undefined = o.launcher.kind === 'external' ? undefined : launched;
  let inFlight = 0;
  const workerHours = () => (workerSeconds + ((liveWorkers ?? 0) * (Date.now() - workerStart)) / 1000) / 3600;
  const show = () =>
    progress.update({
      total: ids.size,
      done: done.size,
      failed: deadBefore + dead.length,
      inFlight: Math.min(inFlight, ids.size - done.size),
      // External workers are known by their reports: those heard from lately.
      workers: o.launcher.kind === 'external' ? recentReporters() : liveWorkers,
      cost: workerHours() * o.pricePerWorkerHour,
      // Launches and instance-hours mean something only where ct starts (and pays for) the workers.
      ...(o.launcher.kind === 'ec2' ? { launched, workerHours: workerHours() } : {}),
    });
  show();

  let nextCheck = 0;
  let checksSinceList = 0;
  let trackFailures = 0;
  while (done.size < ids.size) {
    if (o.signal.aborted) {
      end = 'stopped';
      break;
    }
    let stop: FleetEnd | undefined;
    try {
      stop = await track();
      trackFailures = 0;
    } catch (e) {
      // One round failed after the SDK's retries (throttling, an outage, a dropped connection):
      // the next round does it again; only a final error, or too many in a row, ends the run.
      if (!isRetryable(e) || ++trackFailures >= STEP_TRIES) throw e;
      progress.note(`following the fleet: ${errorMessage(e)}; trying again`);
      await sleep(backoffDelays(trackFailures, 1000, 16_000)[trackFailures - 1]!, o.signal);
      continue;
    }
    if (stop) {
      end = stop;
      break;
    }
    show();
  }

  // Messages refused after the last check are reported too (the queues go with the fleet).
  if (end === 'complete' && remaining.length > 0) await step('reading the dead-letter queue', () => drainDeadLetters());
  const result: RunFleetResult = { end, enqueued: sent, retried: retry.length, launched: o.launcher.names(), workerHours: workerHours(), dead, rejected };
  if (end !== 'complete') {
    await o.launcher.stopAll();
    events.add('stopped', { reason: end, finished: done.size, jobs: ids.size, launched, worker_hours: roundHours(workerHours()) });
    progress.stop();
    return result;
  }
  inFlight = 0;
  show();
  result.merge = await step('merging the results', () => results.merge());
  // What the control plane cost this process (its own, not its local workers'), for the record.
  const cpu = process.cpuUsage();
  events.add('merge', {
    path: result.merge.path,
    ...(result.merge.paths ? { paths: result.merge.paths } : {}),
    samples: result.merge.rows.length,
    controller: { cpu_seconds: Math.round((cpu.user + cpu.system) / 1e4) / 100, max_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024) },
  });
  await step('marking error results', () => reconcileErrorMarkers(result.merge!));
  // Results stay in the bucket; the queues go. Workers see their queue gone and leave by
  // themselves: the controller does not wait for local ones (nothing is paid while they wind
  // down). EC2 instances cost until they end: those still up after a grace are terminated.
  await step('deleting the queues', () => queue.deleteQueues());
  if (o.launcher.kind === 'ec2') await waitForInstances();
  else events.add('teardown', { queues: 'deleted', results_kept: true, launched, worker_hours: roundHours(workerHours()) });
  progress.stop();
  return result;

  /** Error markers as the merged results say: one for every error result, none for the others. */
  async function reconcileErrorMarkers(m: MergeOutcome): Promise<void> {
    const have = new Map((await store.listErrorMarkers()).map((x) => [`${x.kind}/${x.jobId}`, x]));
    const want = new Map<string, ErrorMarker>();
    for (const row of m.rows) {
      if (!row.error) continue;
      const kind: ErrorMarker['kind'] = row.dead ? 'dead' : 'sample';
      want.set(`${kind}/${row.jobId}`, { job_id: row.jobId, kind, error: oneLine(row.error) });
    }
    for (const [k, marker] of want) if (!have.has(k)) await store.putErrorMarker(marker);
    for (const [k, x] of have) if (!want.has(k) && ids.has(x.jobId)) await store.deleteErrorMarker(x.jobId, x.kind);
  }

  /** EC2 workers leave once their queue is gone; whatever still runs after WORKER_EXIT_GRACE_MS (or a poll and 5 s) is terminated. */
  async function waitForInstances(): Promise<void> {
    const deadline = Date.now() + Math.max(WORKER_EXIT_GRACE_MS, (o.timings.pollSeconds + 5) * 1000);
    while (Date.now() < deadline) {
      if (!(await o.launcher.alive())) break;
      await sleep(250);
    }
    await o.launcher.stopAll();
    events.add('teardown', { queues: 'deleted', results_kept: true, launched, worker_hours: roundHours(workerHours()) });
  }

  function recentReporters(): number {
    const since = Date.now() - Math.max(15 * 60_000, 2 * o.timings.visibilityTimeout * 1000);
    return [...reporters.values()].filter((t) => t >= since).length;
  }


  /** One round of following the fleet: done messages, then (every check) dead letters, results, workers; an end, or undefined to go on. */
  async function track(): Promise<FleetEnd | undefined> {
    const messages = await queue.receiveDone({ max: 10, waitSeconds: o.timings.pollSeconds });
    // An `ok` counts only with its result stored: a done message is a hint, the bucket is the
    // record (a forged or mistaken `ok` must not end a job that has no result).
    const stored = await Promise.all(
      messages.map((m) => (m.message?.status === 'ok' && !seenDone.has(m.messageId) && ids.has(m.message.job_id) && !done.has(m.message.job_id) ? store.hasResult(m.message.job_id) : true)),
    );
    for (const [i, m] of messages.entries()) {
      const message = m.message;
      // A message whose delete failed comes again: it was counted the first time.
      const fresh = !seenDone.has(m.messageId);
      seenDone.add(m.messageId);
      if (message?.status === 'concurrency' && message.fleet_id === manifest.fleet_id) {
        if (fresh) workerConcurrency(message.worker, message.concurrency);
        await forget('done', () => queue.deleteDone(m.receiptHandle));
        continue;
      }
      const d = message?.status === 'concurrency' ? undefined : message;
      const refused = !fresh
        ? undefined
        : !d
          ? message
            ? `it names fleet ${message.fleet_id}, not ${manifest.fleet_id}`
            : (m.problem ?? 'not a done message of this protocol')
          : d.fleet_id !== manifest.fleet_id
            ? `it names fleet ${d.fleet_id}, not ${manifest.fleet_id}`
            : !ids.has(d.job_id)
              ? `job ${d.job_id} is not in the manifest`
              : d.status === 'ok' && !stored[i]
                ? `it says job ${d.job_id} is done, but no result of it is stored`
                : undefined;
      if (refused) {
        const r: RejectedReport = {
          message_id: m.messageId,
          reason: `done message: ${refused}`,
          ...(d?.job_id !== undefined ? { job_id: d.job_id } : {}),
          bytes: Buffer.byteLength(m.body, 'utf8'),
          excerpt: m.body.slice(0, REJECTED_EXCERPT_CHARS),
        };
        rejected.push(r);
        events.add('rejected_message', { ...r });
        progress.note(`a done message was ignored: ${oneLine(r.reason)}`);
      } else if (fresh && d) {
        reporters.set(d.worker, Date.now());
        if (d.status === 'ok') markDone(d.job_id, { worker: d.worker, attempt: d.attempt, seconds: d.seconds });
        else if (d.status === 'handed_back') {
          // Queued again by the worker as a fresh message: no attempt spent.
          events.add('handed_back', { job_id: d.job_id, worker: d.worker, reason: d.reason ?? null, attempt: d.attempt, seconds: d.seconds });
          progress.note(`job ${d.job_id} was handed back by ${d.worker} (${d.reason === 'spot' ? 'spot interruption' : 'the worker stopped'}) and queued again; no attempt spent`);
        } else if (d.status === 'superseded') {
          events.add('superseded', { job_id: d.job_id, worker: d.worker });
        } else {
          // An attempt that failed ('dead': the last one; the job is recorded when its dead letter is drained).
          const a = attempts.get(d.job_id) ?? { workers: [], error: '', attempts: 0 };
          a.workers.push(d.worker);
          a.error = d.error ?? 'no error given';
          a.attempts = Math.max(a.attempts, d.attempt);
          attempts.set(d.job_id, a);
          events.add('job_failed', { job_id: d.job_id, worker: d.worker, attempt: d.attempt, error: a.error });
          if (d.status === 'error') events.add('job_requeued', { job_id: d.job_id, attempt: d.attempt });
          progress.note(`job ${d.job_id} failed on attempt ${d.attempt} of ${o.timings.maxAttempts} (${d.worker}): ${oneLine(a.error)}`);
        }
      }
      await forget('done', () => queue.deleteDone(m.receiptHandle));
    }
    if (Date.now() >= nextCheck || messages.length === 0) {
      nextCheck = Date.now() + o.timings.checkSeconds * 1000;
      await drainDeadLetters();
      const depth = await queue.depth();
      const work = depth.work;
      inFlight = work.inFlight;
      // Results whose done message never came (a worker died between storing and reporting). An
      // unfinished job has a message somewhere (work queue, dead letters) until its report is in
      // the done queue: fewer messages than unfinished jobs means a report is missing, and the
      // bucket is listed. Otherwise only every LIST_EVERY_CHECKS checks (the counts are
      // approximate): a listing reads every result key, a cost that grows with the fleet.
      const held = [work, depth.dead, depth.done].reduce((n, d) => n + d.visible + d.inFlight + d.delayed, 0);
      if (held < ids.size - done.size || ++checksSinceList >= LIST_EVERY_CHECKS) {
        checksSinceList = 0;
        await listResults();
      }
      const live = await o.launcher.alive();
      if (live !== undefined && liveWorkers !== undefined && live !== liveWorkers) {
        workerSeconds += (liveWorkers * (Date.now() - workerStart)) / 1000;
        workerStart = Date.now();
      }
      liveWorkers = live;
      if (live === 0 && done.size < ids.size && !(await replaceWorkers())) {
        const why = o.launcher.lastFailure?.();
        events.add('warning', { kind: 'workers_failed', last_failure: why ?? null });
        progress.note(`workers keep stopping with ${ids.size - done.size} job(s) left (${launched} started)${why ? `; last: ${why}` : ''}. Results are kept; resume with:\n  ${o.resumeCommand}`);
        return 'workers-failed';
      }
      // Some workers died (an instance ended) while jobs wait that nobody takes: top the fleet up.
      if (live !== undefined && live > 0 && work.visible > 0 && live < Math.min(o.workers, ids.size - done.size)) await replaceWorkers(live);
      else if (o.scale && live !== undefined && live > 0) await grow(live, work.visible, work.inFlight);
      if (watchdog.check(done.size)) return 'stale';
    }
    return undefined;
  }

  /** `fn`, tried again (up to STEP_TRIES) while it fails with an error AWS said to retry. */
  async function step<T>(doing: string, fn: () => Promise<T>): Promise<T> {
    const delays = backoffDelays(STEP_TRIES - 1, 1000, 16_000);
    for (let i = 0; ; i++) {
      try {
        return await fn();
      } catch (e) {
        if (!isRetryable(e) || i >= delays.length || o.signal.aborted) throw e;
        progress.note(`${doing}: ${errorMessage(e)}; trying again`);
        await sleep(delays[i]!, o.signal);
      }
    }
  }

  /** Deletes a handled done or dead message; one SQS will offer again (a stale handle, a failed call) is handled again, idempotently. */
  async function forget(role: 'done' | 'dead', fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      if (!(e instanceof CloudError) || !(e.retryable || STALE_HANDLE.has(e.code ?? ''))) throw e;
      events.add('warning', { kind: 'message_not_deleted', queue: role, error: errorMessage(e) });
    }
  }

  function markDone(jobId: string, fields: Record<string, unknown>): void {
    if (done.has(jobId)) return;
    done.add(jobId);
    events.add('job_done', { job_id: jobId, ...fields });
  }

  async function listResults(): Promise<void> {
    let cursor: string | undefined;
    do {
      const page = await store.listResultIds(cursor ? { cursor } : {});
      for (const id of page.ids) if (ids.has(id)) markDone(id, { seen: 'stored before its done message arrived' });
      cursor = page.cursor;
    } while (cursor);
  }

  /** Jobs SQS gave up on: each gets an error sample as its result, an event and a note. */
  async function drainDeadLetters(): Promise<void> {
    for (;;) {
      const got = await queue.receiveDead({ max: 10, waitSeconds: 0 });
      const fresh = got.filter((m) => !seenUnreadable.has(m.messageId));
      if (fresh.length === 0) return;
      for (const m of fresh) {
        const mismatch = m.message ? jobMismatch(m.message, manifest) : undefined;
        const job = m.message && !mismatch ? jobsById.get(m.message.job.job_id) : undefined;
        if (!job) {
          // Never run and never a result (not even under a job id it names): left in the DLQ, reported once.
          seenUnreadable.add(m.messageId);
          const r = rejectedOf(m, mismatch);
          rejected.push(r);
          events.add('rejected_message', { ...r });
          progress.note(`a work message was refused unrun and dead-lettered${r.job_id ? ` (it named job ${r.job_id})` : ''}: ${oneLine(r.reason)}`);
          continue;
        }
        if (!done.has(job.job_id) && !(await store.hasResult(job.job_id))) {
          const d = deadJobOf(job, m);
          await store.putResult(job.job_id, await results.deadResult(d));
          await store.putErrorMarker({ job_id: job.job_id, kind: 'dead', error: oneLine(d.error) });
          dead.push(d);
          events.add('job_dead', { job_id: job.job_id, error: d.error, attempts: d.attempts, workers: d.workers });
          progress.note(`job ${job.job_id} failed for good after ${d.attempts} attempt(s): ${oneLine(d.error)}`);
        }
        markDone(job.job_id, { dead: true });
        await forget('dead', () => queue.deleteDead(m.receiptHandle));
      }
    }
  }

  /**
   * A dead letter that is no job of this fleet: a worker's record of a message it refused (the
   * reason, the message, the worker), or a message SQS's backstop moved there unread.
   */
  function rejectedOf(m: Delivery<ParsedJobMessage>, mismatch: string | undefined): RejectedReport {
    const record = m.message ? undefined : parseMessage(rejectedMessageSchema, m.body);
    if (record && 'message' in record && record.message.fleet_id === manifest.fleet_id) {
      const x = record.message.rejected;
      return { message_id: x.message_id, reason: x.reason, ...(x.job_id !== undefined ? { job_id: x.job_id } : {}), worker: x.worker, bytes: x.bytes, excerpt: x.excerpt };
    }
    const jobId = m.message?.job.job_id;
    return {
      message_id: m.messageId,
      reason: mismatch ?? m.problem ?? 'not a job of this fleet',
      ...(jobId !== undefined ? { job_id: jobId } : {}),
      bytes: Buffer.byteLength(m.body, 'utf8'),
      excerpt: m.body.slice(0, REJECTED_EXCERPT_CHARS),
    };
  }

  /** What a dead letter says of its job: the worker's reason and history, or (SQS's backstop) what this controller heard. */
  function deadJobOf(job: AnyJob, m: Delivery<ParsedJobMessage>): DeadJob {
    const msg = m.message!;
    const heard = attempts.get(job.job_id);
    const last = msg.history[msg.history.length - 1];
    const workers = msg.history.length ? msg.history.map((h) => h.worker) : (heard?.workers ?? []);
    return {
      job,
      error: msg.dead?.reason || last?.error || heard?.error || 'no worker reported why (the workers that took it died or were stopped)',
      attempts: msg.dead?.attempts ?? Math.max(heard?.attempts ?? 0, msg.attempts + m.receiveCount - 1, 1),
      workers,
    };
  }

  /** A worker's concurrency changed (or started): recorded, and its slots count for growth. */
  function workerConcurrency(worker: string, c: { from: number; to: number; reason: string; detail?: string }): void {
    reporters.set(worker, Date.now());
    slots.set(worker, c.to);
    events.add('concurrency', { worker, from: c.from, to: c.to, reason: c.reason, ...(c.detail !== undefined ? { detail: c.detail } : {}) });
    if (c.reason !== 'start' && c.to < c.from) progress.note(`${worker} runs ${c.to} sample(s) at once instead of ${c.from}: ${c.reason.replace(/_/g, ' ')}${c.detail ? ` (${c.detail})` : ''}`);
  }

  /**
   * Samples a live worker runs at once: the mean of the latest reports of the `live` workers heard
   * from most recently (a dead worker's last report would otherwise count for the rest of the
   * run), else the fleet's samples_per_worker.
   */
  function slotsPerWorker(live: number): number {
    if (slots.size === 0) return manifest.samples_per_worker;
    const recent = [...slots.keys()].sort((a, b) => (reporters.get(b) ?? 0) - (reporters.get(a) ?? 0)).slice(0, Math.max(1, live));
    return recent.reduce((n, w) => n + slots.get(w)!, 0) / recent.length;
  }

  /** The backlog outgrows the live workers (`scaleUp`): launch more, within --max-workers and the launch budget. */
  async function grow(live: number, backlog: number, busy: number): Promise<void> {
    const decision = scaleUp({
      backlog,
      inFlight: busy,
      liveWorkers: live,
      slotsPerWorker: slotsPerWorker(live),
      waves: o.scale!.waves,
      maxWorkers: o.scale!.maxWorkers,
      budgetLeft: Math.max(0, launchBudget() - launched),
    });
    if (decision.launch <= 0 || Date.now() < growthPausedUntil) return;
    let n: number;
    try {
      n = await o.launcher.start(decision.launch);
    } catch (e) {
      // The fleet runs on without growing: a refusal (an instance limit, a permission) for the
      // rest of the run, anything else for GROWTH_PAUSE_MS.
      growthPausedUntil = e instanceof ConfigError ? Infinity : Date.now() + GROWTH_PAUSE_MS;
      events.add('warning', { kind: 'scale_failed', error: errorMessage(e), wanted: decision.launch });
      progress.note(`the fleet could not grow by ${decision.launch} worker(s) (${oneLine(errorMessage(e))}); it goes on with ${live}${growthPausedUntil === Infinity ? '' : `, trying again in ${GROWTH_PAUSE_MS / 60_000} min`}`);
      return;
    }
    if (n <= 0) return;
    launched += n;
    launchBase += n;
    workerSeconds += (live * (Date.now() - workerStart)) / 1000;
    workerStart = Date.now();
    liveWorkers = live + n;
    events.add('scale', { workers: o.launcher.names().slice(-n), from: live, to: live + n, backlog, in_flight: busy, reason: decision.reason });
    progress.note(`fleet grows to ${live + n} worker(s) (${n} launched, ${launched} in all): ${decision.reason}`);
  }

  /** Fewer workers than wanted (`live`, 0: none) while jobs remain: start replacements, within the launch budget; false when it is spent. */
  async function replaceWorkers(live = 0): Promise<boolean> {
    const left = ids.size - done.size;
    if (launched >= launchBudget()) return false;
    const n = await o.launcher.start(Math.min(o.workers - live, left - live, launchBudget() - launched));
    if (n <= 0) return false;
    launched += n;
    liveWorkers = live + n;
    workerStart = Date.now();
    events.add('replace', { workers: o.launcher.names().slice(-n), left });
    progress.note(`${live === 0 ? 'no worker is running' : `${live} worker(s) running, fewer than wanted,`} and ${left} job(s) remain: started ${n} replacement worker(s)`);
    return true;
  }
}

/** Worker-hours for the events log, to six decimals (a few milliseconds). */
function roundHours(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}

/** A failure on one progress line: what failed and its last meaningful line (why). */
function oneLine(error: string): string {
  return errorExcerpt(error, { maxLines: 2, width: 240 }).join(' ');
}

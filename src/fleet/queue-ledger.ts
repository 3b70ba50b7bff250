/**
 * The controller's enqueue under the queue ledger (protocol.ts `QueueLedger`): what makes a
 * resume queue no job twice. See `queueUnfinished`, and docs/architecture.md for why it holds
 * when the controller dies between any two of its steps.
 */
import type { FleetEventsLog } from './events-log.js';
import { PROTOCOL_VERSION, type AnyJob, type AnyManifest, type ErrorMarker, type QueueLedger } from './protocol.js';
import { DEFAULT_RETENTION_SECONDS } from './sqs-job-queue.js';
import type { JobQueue, ResultStore } from './types.js';

/**
 * A ledger older than this is not trusted (SQS drops messages after their retention, 14 days):
 * a fleet paused that long has its unfinished jobs queued again. One day of margin.
 */
const LEDGER_TRUST_MS = (DEFAULT_RETENTION_SECONDS - 86_400) * 1000;

export interface QueueUnfinishedOptions {
  store: ResultStore;
  queue: JobQueue;
  manifest: AnyManifest;
  /** Jobs with a result (the ones being retried excluded only later: they still count as finished here). */
  done: ReadonlySet<string>;
  /** Error results to queue again (their results and markers are removed first). */
  retry: ReadonlyArray<{ jobId: string; kind: ErrorMarker['kind'] }>;
  /** The work queue's identity now (`QueueCreation.queueId`). */
  queueId: string;
  events: FleetEventsLog;
  /** Runs one step, again while AWS says retry (the controller's `step`). */
  step: <T>(doing: string, fn: () => Promise<T>) => Promise<T>;
}

/**
 * Queues what has no message: every unfinished job, unless a `queued` ledger of this same work
 * queue says they are all still there (visible, in flight, delayed or dead-lettered), plus the
 * error results being retried. Why a controller may die between any two steps:
 *   1. ledger := enqueueing (generation g)      died here: the next run sees `enqueueing`,
 *                                               trusts nothing and queues every unfinished job
 *                                               under g+1; workers drop older messages unrun.
 *   2. retried results, then markers, deleted   died here: those jobs are unfinished, as in 1.
 *   3. messages sent with ticket g              died here: as in 1; duplicates are superseded.
 *   4. ledger := queued                         from here a resume queues nothing again.
 * Returns the messages sent.
 */
export async function queueUnfinished(o: QueueUnfinishedOptions): Promise<number> {
const { store, queue, manifest, done, retry, queueId, events, step } = o;
const jobsById = new Map(manifest.jobs.map((j) => [j.job_id, j]));
  const ledger = await store.getLedger();
  const unfinished = manifest.jobs.filter((j) => !done.has(j.job_id));
  let trusted =
    ledger !== undefined && ledger.state === 'queued' && ledger.queue_id === queueId && Date.now() - Date.parse(ledger.updated) < LEDGER_TRUST_MS;
  if (trusted && unfinished.length > 0) {
    // A queue with nothing at all in it cannot hold the unfinished jobs' messages.
    const d = await queue.depth();
    if (d.work.visible + d.work.inFlight + d.work.delayed + d.dead.visible + d.dead.inFlight === 0) trusted = false;
  }
  const generation = (ledger?.generation ?? 0) + 1;
  const retried = retry.map((r) => jobsById.get(r.jobId)!);
  const toSend: AnyJob[] = [...(trusted ? [] : unfinished), ...retried];
  if (toSend.length === 0) return 0;
  const next: QueueLedger = {
    version: PROTOCOL_VERSION,
    fleet_id: manifest.fleet_id,
    generation,
    base: trusted ? ledger!.base : generation,
    requeued: trusted ? { ...ledger!.requeued, ...Object.fromEntries(retried.map((j) => [j.job_id, generation])) } : {},
    state: 'enqueueing',
    queue_id: queueId,
    updated: new Date().toISOString(),
  };
  await step('writing the queue ledger', () => store.putLedger(next));
  if (retried.length) {
    await step('removing the error results to retry', async () => {
      for (const r of retry) {
        await store.deleteResult(r.jobId);
        await store.deleteErrorMarker(r.jobId, r.kind);
      }
    });
    events.add('retry', { jobs: retry.map((r) => r.jobId), kinds: retry.map((r) => r.kind) });
  }
  const r = await step('enqueueing the jobs', () =>
    queue.enqueue(toSend.map((job) => ({ version: PROTOCOL_VERSION, fleet_id: manifest.fleet_id, job, ticket: generation, attempts: 0, history: [] }))),
  );
  if (r.failed > 0) throw new Error(`SQS refused ${r.failed} of ${toSend.length} job(s); run the same command again to queue the rest`);
  await step('writing the queue ledger', () => store.putLedger({ ...next, state: 'queued', updated: new Date().toISOString() }));
  if (ledger && !trusted && unfinished.length > 0) {
    events.add('warning', { kind: 'requeued_generation', generation, jobs: unfinished.length, why: ledger.state === 'enqueueing' ? 'an earlier enqueue did not finish' : 'the earlier messages are gone' });
  }
  return r.sent;
}

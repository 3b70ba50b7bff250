/**
 * The fleet's words and seams.
 *
 * Glossary
 * - fleet: the cloud resources of one deterministic run (three queues, objects under
 *   `{fleet_id}/` in the bucket, workers, secrets). Its id hashes everything that changes results
 *   (`fleet-id.ts`), so the same command finds the same fleet and resumes it.
 * - job: one sample-epoch of the run, named by `job_id`; one message on the work queue.
 * - attempt: one delivery of a job that a worker ran and that failed (reported) or died with (its
 *   visibility ran out). A hand-back (the worker was stopping, a spot notice) is not an attempt:
 *   the job is queued again as a fresh message carrying the attempts spent so far. ct counts
 *   attempts itself (`attempts` in the message + SQS's receive count) and dead-letters a job
 *   after `fleet.max_receive_count` of them; SQS's own redrive sits above that as a backstop.
 * - generation (ticket): each enqueue by a controller is a generation, recorded in the queue
 *   ledger (`protocol.ts`); a message of a superseded generation is dropped by the worker unrun.
 * - worker: one process taking jobs (`ct fleet worker`): on an EC2 instance, on this machine
 *   (`local:N`), or on the user's own machines (`external`).
 * - slot, concurrency: a worker runs each job in a slot; a slot takes the next job as soon as its
 *   own ends. Its concurrency (slots in use at most) adapts to its machine unless the user fixed
 *   it (`adaptive-concurrency.ts`); it reports each change on the done queue.
 * - growth: an EC2 fleet launches more workers while its queue outgrows its busy workers
 *   (`scaling.ts`); a worker without a job for fleet.idle_minutes leaves on its own.
 * - controller: the user's `ct run eval --fleet` process: writes the manifest, creates the queues,
 *   enqueues jobs, starts workers through a launcher, tracks done messages, merges the results.
 * - launcher: what starts and stops workers (`WorkerLauncher`): local processes, nothing
 *   (external), or EC2 instances.
 * - result: a job's one-sample `.eval`, at `{fleet_id}/{job_id}.eval` in the bucket. A sample that
 *   failed on its own (policy crash, scorer error) is still a result; only infrastructure failure
 *   leaves a job without one. Written once: the first writer wins, a late duplicate is dropped.
 * - DLQ: the dead-letter queue; a worker moves a job there after its last allowed attempt (SQS
 *   too, as a backstop). The controller stores an error result for what it finds there, so a
 *   plain resume does not run it again; a rerun retries error results unless `--no-retry-errors`.
 *
 * Delivery is at least once (SQS), results exactly once (conditional writes keyed by job id).
 */
import type { AnyManifest, DoneMessage, ErrorMarker, JobMessage, ParsedJobMessage, QueueLedger, RejectedMessage } from './protocol.js';

/**
 * A job's state as the controller sees it:
 *
 *   pending --enqueue--> queued --receive--> running --result put + done sent + delete--> done
 *                          ^                    |
 *                          +--------------------+  visibility expired (worker died or froze: an
 *                          |                       attempt), a reported failure (an attempt), or
 *                          |                       handed back as a fresh message (not an attempt)
 *                          +--attempts spent--> dead
 *
 * - pending: in the manifest, not on the queue (no result, no DLQ entry); the controller enqueues it.
 * - queued: its message is visible on the work queue.
 * - running: a worker holds its message (invisible) and extends the visibility while it runs.
 * - done: its result is in the bucket. Terminal: a later attempt's result is not stored.
 * - dead: in the DLQ. Terminal for this fleet; reported as a failed job (attempts, errors, workers).
 */
export type JobState = 'pending' | 'queued' | 'running' | 'done' | 'dead';

/** Allowed transitions of `JobState` (the diagram above). */
export const JOB_TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  pending: ['queued'],
  queued: ['running', 'dead'],
  running: ['queued', 'done'],
  done: [],
  dead: [],
};

/** Longest long poll SQS allows, in seconds (what a worker waits for work). */
export const LONG_POLL_SECONDS = 20;

/** SQS takes at most 10 messages per batch call and returns at most 10 per receive. */
export const SQS_BATCH = 10;

/** Queue attributes the controller sets on the work queue (and reconciles on resume). */
export interface QueueSettings {
  /** Seconds a received job stays invisible before it is offered again (config `fleet.visibility_timeout`, default 600). */
  visibilityTimeoutSeconds: number;
  /**
   * SQS's redrive after this many receives of one message: a backstop above ct's own attempt
   * limit (`backstopReceiveCount(fleet.max_receive_count)`), reached only by messages no worker
   * can read.
   */
  maxReceiveCount: number;
  /** Seconds SQS keeps an unreceived message (default 1,209,600 = 14 days, SQS's maximum). */
  retentionSeconds?: number;
}

/** What `JobQueue.create` did. */
export interface QueueCreation {
  /** False when all three queues already existed (a resumed fleet). */
  created: boolean;
  /** Attributes of existing queues that differed and were set to the requested values, e.g. `work.VisibilityTimeout: 900 -> 600`. */
  reconciled: string[];
  /** Identifies this incarnation of the work queue (its creation time): a re-created queue holds no earlier message. */
  queueId: string;
}

/** SQS's maxReceiveCount for ct's attempt limit: two receives above it, so ct dead-letters first. */
export function backstopReceiveCount(maxAttempts: number): number {
  return maxAttempts + 2;
}

/** One received message. `message` is undefined when the body is not a message this ct can run. */
export interface Delivery<T> {
  /** The parsed message, or undefined (see `problem`): such a message is never run; a worker moves it to the DLQ with the reason. */
  message?: T;
  /** Why the body could not be parsed (e.g. another protocol version), when `message` is undefined. */
  problem?: string;
  body: string;
  /** Identifies this delivery for extend / release / delete; stale after the visibility passes. */
  receiptHandle: string;
  /** The attempt this delivery is (1 on the first). */
  receiveCount: number;
  messageId: string;
}

export interface ReceiveOptions {
  /** Messages wanted, 1-10 (a worker asks for at most its free slots). */
  max: number;
  /** Long poll, 0-20 s: returns as soon as a message is there, or empty after this long. */
  waitSeconds: number;
}

/** Messages on one queue, as SQS estimates them. */
export interface QueueDepth {
  visible: number;
  /** Received and not yet deleted or returned (NotVisible). */
  inFlight: number;
  /** Sent with a delay that has not passed (a failed job waiting for its retry). */
  delayed: number;
}

/**
 * One fleet's three queues (work, done, DLQ). Implemented over SQS (`sqs-job-queue.ts`) and in
 * memory (`memory-job-queue.ts`); both pass test/fleet/conformance.ts.
 *
 * A receive is never aborted once started (an aborted long poll can orphan the messages SQS was
 * about to return, leaving them invisible for a whole timeout): to stop, stop starting receives.
 * Errors are `CloudError`s; `code` `QueueDoesNotExist` (not retryable) means the fleet was torn down.
 */
export interface JobQueue {
  readonly fleetId: string;
  /**
   * Creates the DLQ, the work queue (redrive to the DLQ after `maxReceiveCount`) and the done
   * queue; on an existing fleet, sets attributes that differ. Re-creating a name SQS deleted less
   * than 60 s ago fails with a retryable CloudError `QueueDeletedRecently`.
   */
  create(settings: QueueSettings): Promise<QueueCreation>;
  /**
   * Enqueues jobs in batches of 10 (SQS's limit); entries SQS refuses are retried, then counted
   * as failed. `delaySeconds` (0-900) keeps them invisible that long (a retry's delay).
   */
  enqueue(jobs: readonly JobMessage[], o?: { delaySeconds?: number }): Promise<{ sent: number; failed: number }>;
  /** Up to `max` jobs from the work queue, each invisible for the queue's visibility timeout. */
  receive(o: ReceiveOptions): Promise<Delivery<ParsedJobMessage>[]>;
  /** Puts a job whose attempts are spent, or the record of a message refused unrun, on the dead-letter queue (the caller then deletes its work message). */
  deadLetter(job: JobMessage | RejectedMessage): Promise<void>;
  /** Heartbeat: the job stays invisible for `seconds` from now. */
  extend(receiptHandle: string, seconds: number): Promise<void>;
  /** Makes a job visible again at once (a stopping worker hands back what it took but did not start). */
  release(receiptHandle: string): Promise<void>;
  /** Removes a job for good (after its result is stored and its done message sent). */
  delete(receiptHandle: string): Promise<void>;
  sendDone(done: DoneMessage): Promise<void>;
  receiveDone(o: ReceiveOptions): Promise<Delivery<DoneMessage>[]>;
  deleteDone(receiptHandle: string): Promise<void>;
  /** Dead jobs, read without removing them (they become visible again after the visibility timeout). */
  receiveDead(o: ReceiveOptions): Promise<Delivery<ParsedJobMessage>[]>;
  /** Removes a dead job once the controller has recorded it. */
  deleteDead(receiptHandle: string): Promise<void>;
  depth(): Promise<{ work: QueueDepth; done: QueueDepth; dead: QueueDepth }>;
  /** Whether the work queue exists (a worker's check that its fleet is still there). */
  exists(): Promise<boolean>;
  /** Deletes the three queues; queues already gone are fine. */
  deleteQueues(): Promise<void>;
}

/** What `put*IfAbsent` did: `stored` false means an object was already there (first writer wins). */
export interface PutOutcome {
  stored: boolean;
}

/**
 * One fleet's objects in the bucket, plus the bucket-wide code artifacts. Implemented over S3
 * (`s3-result-store.ts`) and in memory (`memory-result-store.ts`); both pass
 * test/fleet/conformance.ts. Results are written with server-side encryption.
 */
export interface ResultStore {
  readonly fleetId: string;
  /** Stores a job's result unless one is there; a late duplicate gets `stored: false` and is not written. */
  putResult(jobId: string, body: Uint8Array): Promise<PutOutcome>;
  hasResult(jobId: string): Promise<boolean>;
  getResult(jobId: string): Promise<Uint8Array | undefined>;
  /** Job ids with a result, one page at a time in key order; pass the returned `cursor` for the next page (undefined: no more). */
  listResultIds(o?: { cursor?: string; pageSize?: number }): Promise<{ ids: string[]; cursor?: string }>;
  /** Removes a job's result (a rerun retrying an error); a missing one is fine. */
  deleteResult(jobId: string): Promise<void>;
  /** The queue ledger (what controllers queued), or undefined before the first enqueue. */
  getLedger(): Promise<QueueLedger | undefined>;
  /** Replaces the queue ledger. */
  putLedger(ledger: QueueLedger): Promise<void>;
  /** Records that a job's result is an error (replaces one there). */
  putErrorMarker(marker: ErrorMarker): Promise<void>;
  /** Every error marker's job and kind (read from the keys). */
  listErrorMarkers(): Promise<Array<{ jobId: string; kind: ErrorMarker['kind'] }>>;
  deleteErrorMarker(jobId: string, kind: ErrorMarker['kind']): Promise<void>;
  /** Writes the manifest unless one is there (a resumed fleet keeps its first). */
  putManifest(manifest: AnyManifest): Promise<PutOutcome>;
  /** The fleet's manifest, or undefined; a ConfigError naming both versions when another protocol wrote it. */
  getManifest(): Promise<AnyManifest | undefined>;
  /** Stores a monitor job's input sample unless one is there (`{fleet_id}/inputs/{job_id}.eval`). */
  putInput(jobId: string, body: Uint8Array): Promise<PutOutcome>;
  getInput(jobId: string): Promise<Uint8Array | undefined>;
  /** Job ids whose input is stored. */
  listInputIds(): Promise<Set<string>>;
  /** Uploads `artifacts/{sha}.tar.gz` unless present (a SHA's content never changes). */
  putArtifact(sha: string, body: Uint8Array): Promise<PutOutcome>;
  getArtifact(sha: string): Promise<Uint8Array | undefined>;
  /** A worker's log file, `{fleet_id}/logs/{worker}-{name}`; overwritten. */
  putLog(worker: string, name: string, body: Uint8Array | string): Promise<void>;
}

/** Where workers run: this machine's processes, the user's machines, or EC2 instances. */
export type LauncherKind = 'local' | 'external' | 'ec2';

/** What starts and stops a fleet's workers. Implementations belong to the controller side. */
export interface WorkerLauncher {
  readonly kind: LauncherKind;
  /** Starts `n` more workers; returns how many it started (external: 0, it prints how to start them). */
  start(n: number): Promise<number>;
  /** Workers alive now, or undefined when this launcher cannot see them (external). */
  alive(): Promise<number | undefined>;
  /** Stops every worker it started (local: SIGTERM then SIGKILL; ec2: terminate). */
  stopAll(): Promise<void>;
}

/**
 * The seam between a fleet worker's message handling (worker.ts: leases, attempts, results,
 * done messages, hand-backs, spot and signals, the same for every fleet) and what its jobs are.
 * An eval fleet's job is a sample run in a sandbox (`eval-job-handler.ts`); a monitor fleet's is
 * an existing sample rated by a monitor (`control/monitor-job-handler.ts`): no settings, no
 * sandbox, no Docker.
 */
import type { SampleEnd } from '../errors.js';
import type { RunSession } from '../eval/run-session.js';
import type { EvalSample } from '../log/types.js';
import type { Lease } from './lease.js';
import type { AnyJob, ParsedJobMessage } from './protocol.js';
import type { SampleNeeds } from './adaptive-concurrency.js';
import type { Delivery } from './types.js';

/** What the worker keeps of a job while it runs, around the handler's own part `P`. */
export interface JobFields {
  job: AnyJob;
  delivery: Delivery<ParsedJobMessage>;
  startedAt: number;
  lease: Lease;
  /** Queued again as a fresh message (spot interruption): its result is not kept. */
  requeued?: boolean;
  /** The sample's phase (eval jobs), so a failure while its sandbox started is told apart. */
  phase?: string;
}

/** A running job: the handler's work item and the worker's fields. */
export type JobItem<P> = P & JobFields;

export interface JobRunOptions<P> {
  /** The jobs, as the work queue delivers them (already resolved). */
  work: AsyncIterable<JobItem<P>>;
  /** Jobs at once at most (the pool's slots; the work source holds them to the worker's current concurrency). */
  concurrency: number;
  /** Its `signal` stops running jobs; `provider` exists when the handler named a sandbox. */
  session: RunSession;
  onStart: (item: JobItem<P>) => void;
  /** A job's sample entered a phase (handlers that run samples in sandboxes). */
  onPhase?: (item: JobItem<P>, phase: string) => void;
  /** Each finished job's sample and how it ended (`no-result`: the attempt failed). */
  onResult: (item: JobItem<P>, sample: EvalSample, end: SampleEnd, reason?: string) => Promise<void>;
}

/** The part of a worker that depends on the fleet's kind. */
export interface JobHandler<P> {
  /** The sandbox the jobs run in (opened by the worker's session), or undefined: no sandbox. */
  readonly sandbox?: string;
  /** One line naming the job for the worker's log. */
  describe(job: AnyJob): string;
  /** The job's work item; a throw fails this attempt (reported, offered again). */
  resolve(job: AnyJob): Promise<P>;
  /** Runs the jobs through the sample pool until `work` ends. */
  run(o: JobRunOptions<P>): Promise<void>;
  /** The job's result as stored: a one-sample log of `sample`. */
  resultLog(item: JobItem<P>, sample: EvalSample): Promise<Uint8Array>;
  /** Why the result counts as an error result (marked, retried by a rerun), or undefined. */
  errorOf(sample: EvalSample): string | undefined;
  /** What one job needs of the machine, when its environments say (the largest among the fleet's); absent: the default. */
  needs?(): SampleNeeds | undefined;
  /** Removes what the handler made (temporary files) when the worker stops. */
  close?(): Promise<void>;
}

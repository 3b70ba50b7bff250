/**
 * A worker's jobs, as the sample pool pulls them: an async iterator over the work queue that
 * receives only for free slots (never more messages than it can start) and never aborts a
 * receive (an aborted long poll can lose the messages SQS was returning: to stop, it stops
 * starting them). Each received message goes through `take`, which turns it into a job to run
 * or handles it on the spot (already done, superseded, dead). The number of free slots follows the
 * worker's concurrency as it changes (`concurrency` is read at each receive): with every slot
 * busy it waits for one to free (`wake`) before receiving, and a slot freed by one job takes the
 * next job at once, however long the others run. It ends when the fleet's queue is gone, when
 * `idle_polls` polls in a row found nothing while nothing ran and the queue held nothing, when
 * the worker has had no job for `idleMs` (fleet.idle_minutes: the fleet goes on without it), or
 * when the worker stops; what it holds but did not start is then handed back.
 */
import { CloudError, errorMessage } from '../errors.js';
import { backoffDelays, sleep } from '../host/backoff.js';
import type { ParsedJobMessage } from './protocol.js';
import { SQS_BATCH, type Delivery, type JobQueue } from './types.js';

/** Failed polls in a row before the worker gives up. */
const MAX_POLL_FAILURES = 5;
/** With every slot busy, how often the source looks again besides being woken (a stop, a missed wake): 500 ms. */
const FULL_RECHECK_MS = 500;

export interface JobSourceOptions<T> {
  queue: JobQueue;
  /** Samples run at once (read at each receive, so it may change): a receive asks for the free ones. */
  concurrency: number | (() => number);
  /** Samples running now. */
  running: () => number;
  /** Long poll of one receive (fleet.poll_seconds). */
  pollSeconds: number;
  /** Empty polls in a row (nothing running, nothing queued) after which the work is done (fleet.idle_polls). */
  idlePolls: number;
  /** Milliseconds without a job (nothing running, nothing received) after which this worker leaves (fleet.idle_minutes); absent: never. */
  idleMs?: number;
  /** The clock (default Date.now). */
  now?: () => number;
  /** Aborted: take nothing more (a stopping or draining worker). */
  stopped: () => boolean;
  /** Aborted while sleeping between failed polls. */
  signal: AbortSignal;
  /** A received message: the item to run, or undefined when it was handled here. */
  take: (d: Delivery<ParsedJobMessage>) => Promise<T | undefined>;
  /** Hands back messages received but never started (no attempt spent). */
  handBack: (d: Delivery<ParsedJobMessage>[]) => Promise<void>;
  log: (line: string) => void;
}

/**
 * Why a job source ended: `done` (the queue stayed empty), `fleet-gone` (its queues were
 * deleted), `idle` (no job for fleet.idle_minutes while the fleet goes on), `stopped`.
 */
export type JobSourceEnd = 'done' | 'fleet-gone' | 'idle' | 'stopped';

export class JobSource<T> implements AsyncIterableIterator<T> {
  /** Why it ended (set once it has). */
  end?: JobSourceEnd;
  private readonly buffer: Delivery<ParsedJobMessage>[] = [];
  private emptyPolls = 0;
  private pollFailures = 0;
  private lastBusy: number;
  private wakeUp?: () => void;

  constructor(private readonly o: JobSourceOptions<T>) {
    this.lastBusy = this.now();
  }

  /** A slot freed or the concurrency changed: a source waiting for a free slot looks again. */
  wake(): void {
    this.wakeUp?.();
  }

  private now(): number {
    return (this.o.now ?? Date.now)();
  }

  private limit(): number {
    return typeof this.o.concurrency === 'function' ? this.o.concurrency() : this.o.concurrency;
  }

  /** Resolves when woken, or after FULL_RECHECK_MS. */
  private waitForSlot(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, FULL_RECHECK_MS);
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.wakeUp === done) self.wakeUp = undefined;
        resolve();
      }
      this.wakeUp = done;
    });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<T>> {
    const { queue, log } = this.o;
    for (;;) {
      if (this.o.stopped()) return this.finish('stopped');
      const d = this.buffer.shift();
      if (d) {
        const item = await this.o.take(d);
        if (item) return { done: false, value: item };
        continue;
      }
      const free = this.limit() - this.o.running();
      if (free <= 0) {
        // Every slot busy (the concurrency may have dropped below the jobs running): receive
        // nothing until one frees, so no message waits here while its visibility runs out.
        this.lastBusy = this.now();
        await this.waitForSlot();
        continue;
      }
      let got: Delivery<ParsedJobMessage>[];
      try {
        got = await queue.receive({ max: Math.min(free, SQS_BATCH), waitSeconds: this.o.pollSeconds });
        this.pollFailures = 0;
      } catch (e) {
        if (queueGone(e)) return this.finish('fleet-gone');
        if (++this.pollFailures >= MAX_POLL_FAILURES) throw new CloudError(`polling the work queue failed ${this.pollFailures} times in a row: ${errorMessage(e)}`, false);
        log(`polling the work queue failed (${errorMessage(e)}); trying again`);
        await sleep(backoffDelays(this.pollFailures, 1000, 20_000)[this.pollFailures - 1]!, this.o.signal).catch(() => {});
        continue;
      }
      this.buffer.push(...got);
      if (got.length > 0) {
        this.emptyPolls = 0;
        this.lastBusy = this.now();
        continue;
      }
      if (this.o.running() > 0) {
        this.lastBusy = this.now();
        continue;
      }
      if (this.o.idleMs !== undefined && this.now() - this.lastBusy >= this.o.idleMs) {
        log(`no job for ${Math.round((this.now() - this.lastBusy) / 60_000)} min (fleet.idle_minutes); leaving the fleet to the other workers`);
        return this.finish('idle');
      }
      let depth;
      try {
        depth = (await queue.depth()).work;
      } catch (e) {
        if (queueGone(e)) return this.finish('fleet-gone');
        continue;
      }
      this.emptyPolls = depth.visible + depth.inFlight + depth.delayed === 0 ? this.emptyPolls + 1 : 0;
      if (this.emptyPolls >= this.o.idlePolls) {
        log(`the work queue stayed empty for ${this.emptyPolls} poll(s); the work is done`);
        return this.finish('done');
      }
    }
  }

  /** The pool closed the source: hand back what is held. */
  async return(): Promise<IteratorResult<T>> {
    return this.finish(this.end ?? 'stopped');
  }

  private async finish(end: JobSourceEnd): Promise<IteratorResult<T>> {
    this.end ??= end;
    if (end === 'fleet-gone') this.o.log('the work queue is gone (the controller finished the fleet); stopping');
    const left = this.buffer.splice(0);
    if (left.length) await this.o.handBack(left);
    return { done: true, value: undefined };
  }
}

/** The fleet's queues were deleted (the controller finished). */
export function queueGone(e: unknown): boolean {
  return e instanceof CloudError && e.code === 'QueueDoesNotExist';
}

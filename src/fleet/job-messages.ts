/**
 * What a worker does with a job's message once it has it: report it on the done queue, hand it
 * back (a fresh message carrying the attempts spent so far: no attempt spent), record a failed
 * attempt (in the job's history, queued again after the retry delay), or move it to the
 * dead-letter queue when its attempts are spent. Attempts are ct's (protocol.ts): this delivery
 * is attempt `message.attempts + receiveCount`. Every message the worker holds is tracked here,
 * so a forced stop can release them all.
 */
import { errorMessage } from '../errors.js';
import { MAX_HISTORY, MAX_HISTORY_ERROR, PROTOCOL_VERSION, REJECTED_EXCERPT_CHARS, type AttemptRecord, type ConcurrencyReport, type JobDoneMessage, type ParsedJobMessage, type RejectedMessage } from './protocol.js';
import type { Delivery, JobQueue } from './types.js';

/** Longest wait before a failed job is offered again (seconds). */
const MAX_RETRY_DELAY_SECONDS = 300;
/** Characters of an error message a done message carries (SQS takes 256 KB a message). */
const MAX_ERROR_CHARS = 4000;

/** What became of the messages a worker handled, by outcome (the outcomes are described at worker.ts `JobOutcome`). */
export type MessageCounts = Record<'ok' | 'skipped' | 'failed' | 'released' | 'rejected' | 'preempted' | 'dead' | 'superseded', number>;

export interface JobMessagesOptions {
  queue: JobQueue;
  fleetId: string;
  workerName: string;
  /** Attempts of a job before it is dead-lettered (the manifest's max_attempts). */
  maxAttempts: number;
  /** Seconds before a failed job is offered again, times its attempt (fleet.retry_delay; at most 300 s). */
  retryDelay: number;
  log: (line: string) => void;
}

export class JobMessages {
  readonly counts: MessageCounts = { ok: 0, skipped: 0, failed: 0, released: 0, rejected: 0, preempted: 0, dead: 0, superseded: 0 };
  /** Messages this worker holds (received, not yet deleted, released or handed back). */
  private readonly held = new Map<string, Delivery<ParsedJobMessage>>();

  constructor(private readonly o: JobMessagesOptions) {}

  /** The attempt this delivery is: attempts spent by earlier messages + this message's receives. */
  attemptOf(d: Delivery<ParsedJobMessage>): number {
    return d.message!.attempts + d.receiveCount;
  }

  hold(d: Delivery<ParsedJobMessage>): void {
    this.held.set(d.receiptHandle, d);
  }

  /** The message is done with (deleted after its result, or dropped). */
  async remove(d: Delivery<ParsedJobMessage>): Promise<void> {
    this.held.delete(d.receiptHandle);
    await this.o.queue.delete(d.receiptHandle);
  }

  /** Forced stop: no time for fresh messages; each held one is visible again at once (a receive the backstop allows for). */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held.values()].map((d) => this.o.queue.release(d.receiptHandle).catch(() => {})));
  }

  /** A report on the done queue (never fails the job: a lost report only delays the controller's count). */
  async report(d: Pick<JobDoneMessage, 'job_id' | 'status' | 'error' | 'attempt' | 'seconds' | 'reason'>): Promise<void> {
    await this.o.queue
      .sendDone({
        version: PROTOCOL_VERSION,
        fleet_id: this.o.fleetId,
        worker: this.o.workerName,
        ...d,
        ...(d.status === 'ok' ? { key: `${this.o.fleetId}/${d.job_id}.eval` } : {}),
        ...(d.error !== undefined ? { error: d.error.slice(0, MAX_ERROR_CHARS) } : {}),
      })
      .catch((e) => this.o.log(`job ${d.job_id}: could not send its ${d.status} report: ${errorMessage(e)}`));
  }

  /** How many samples this worker runs at once changed (or started): told to the controller, which records it; a lost report is only a missing event. */
  async reportConcurrency(c: ConcurrencyReport['concurrency']): Promise<void> {
    await this.o.queue
      .sendDone({ version: PROTOCOL_VERSION, fleet_id: this.o.fleetId, status: 'concurrency', worker: this.o.workerName, concurrency: { ...c, ...(c.detail !== undefined ? { detail: c.detail.slice(0, 500) } : {}) } })
      .catch((e) => this.o.log(`could not report its concurrency (${c.from} -> ${c.to}): ${errorMessage(e)}`));
  }

  /**
   * A message that is not a runnable job of this fleet (unreadable, another protocol or fleet,
   * unknown fields, too large, a job the manifest does not have or has otherwise): never run. It
   * goes to the dead-letter queue at once as a record of why (the body cut to its first
   * characters), the controller reports it, and the work message is deleted. If the record
   * cannot be sent, the message is released and SQS's backstop redrive moves it later.
   */
  async reject(d: Delivery<ParsedJobMessage>, reason: string): Promise<void> {
    const jobId = d.message?.job.job_id ?? jobIdOfBody(d.body);
    const record: RejectedMessage = {
      version: PROTOCOL_VERSION,
      fleet_id: this.o.fleetId,
      rejected: {
        reason: reason.slice(0, MAX_HISTORY_ERROR),
        message_id: d.messageId,
        worker: this.o.workerName,
        ...(jobId !== undefined ? { job_id: jobId } : {}),
        bytes: Buffer.byteLength(d.body, 'utf8'),
        excerpt: d.body.slice(0, REJECTED_EXCERPT_CHARS),
      },
    };
    this.counts.rejected++;
    try {
      await this.o.queue.deadLetter(record);
    } catch (e) {
      this.o.log(`message ${d.messageId}: could not move it to the dead-letter queue (released; SQS moves it after its backstop receive count): ${errorMessage(e)}`);
      return this.release(d);
    }
    this.held.delete(d.receiptHandle);
    await this.o.queue.delete(d.receiptHandle).catch((e) => this.o.log(`message ${d.messageId}: could not delete it after dead-lettering it (it is refused again): ${errorMessage(e)}`));
  }

  /** Visible again at once (a forced stop, or a refused message whose dead-letter record could not be sent). */
  async release(d: Delivery<ParsedJobMessage>): Promise<void> {
    this.held.delete(d.receiptHandle);
    await this.o.queue.release(d.receiptHandle).catch((e) => this.o.log(`message ${d.messageId}: could not hand it back (offered again when its visibility passes): ${errorMessage(e)}`));
  }

  /** Hands jobs back without spending an attempt: the worker is stopping, or its spot instance goes. */
  async handBack(ds: Delivery<ParsedJobMessage>[], reason: 'stopping' | 'spot', elapsed = 0): Promise<void> {
    await Promise.all(
      ds.map(async (d) => {
        if (!d.message) return this.release(d);
        const job = d.message.job;
        if (await this.requeue(d, { attempts: this.attemptOf(d) - 1, history: d.message.history })) {
          if (reason === 'spot') this.counts.preempted++;
          else this.counts.released++;
          await this.report({ job_id: job.job_id, status: 'handed_back', reason, attempt: this.attemptOf(d), seconds: elapsed });
          this.o.log(`job ${job.job_id} handed back (${reason === 'spot' ? 'spot interruption' : 'the worker is stopping'}): queued again, no attempt spent`);
        }
      }),
    );
  }

  /** An attempt without a result: recorded in the job's history, and offered again after the retry delay (or dead when none is left). */
  /**
   * An attempt that failed. `retryable: false` for a failure every attempt would meet (the job's
   * sample does not resolve from the pinned settings, or its compose file asks for powers the
   * fleet did not trust): dead-lettered at once instead of spending the other attempts.
   */
  async failAttempt(d: Delivery<ParsedJobMessage>, error: string, secs: number, o: { retryable?: boolean } = {}): Promise<void> {
    const m = d.message!;
    const attempt = this.attemptOf(d);
    const history = [...m.history, { attempt, worker: this.o.workerName, error: error.slice(0, MAX_HISTORY_ERROR) }].slice(-MAX_HISTORY);
    this.counts.failed++;
    if (o.retryable === false) {
      this.o.log(`job ${m.job.job_id} cannot run here or anywhere (not retried): ${firstLine(error)}`);
      return this.deadLetter(d, `${error} (not retried: every attempt would fail the same way)`, attempt, history);
    }
    if (attempt >= this.o.maxAttempts) return this.deadLetter(d, error, attempt, history);
    const delay = Math.min(this.o.retryDelay * attempt, MAX_RETRY_DELAY_SECONDS);
    await this.report({ job_id: m.job.job_id, status: 'error', error, attempt, seconds: secs });
    await this.requeue(d, { attempts: attempt, history, delaySeconds: delay });
    this.o.log(`job ${m.job.job_id} failed in ${secs}s (attempt ${attempt} of ${this.o.maxAttempts}; offered again in ${delay}s): ${firstLine(error)}`);
  }

  /** A job whose attempts are spent: on the dead-letter queue with its history, for the controller to record. */
  async deadLetter(d: Delivery<ParsedJobMessage>, reason: string, attempts: number, history: AttemptRecord[]): Promise<void> {
    const m = d.message!;
    try {
      await this.o.queue.deadLetter({ ...m, attempts, history, dead: { reason: reason.slice(0, MAX_HISTORY_ERROR), attempts } });
    } catch (e) {
      this.o.log(`job ${m.job.job_id}: could not move it to the dead-letter queue (offered again when its visibility passes): ${errorMessage(e)}`);
      this.held.delete(d.receiptHandle);
      return;
    }
    this.held.delete(d.receiptHandle);
    await this.o.queue.delete(d.receiptHandle).catch(() => {});
    this.counts.dead++;
    await this.report({ job_id: m.job.job_id, status: 'dead', error: reason, attempt: attempts, seconds: 0 });
    this.o.log(`job ${m.job.job_id} failed for good after ${attempts} attempt(s): ${firstLine(reason)}`);
  }

  /**
   * Queues the job again as a fresh message, then deletes this one: what a hand-back (no attempt
   * spent: `attempts` counts only this message's earlier receives, which died) and a reported
   * failure (this attempt spent, `delaySeconds` before the next) both do.
   */
  private async requeue(d: Delivery<ParsedJobMessage>, next: { attempts: number; history: AttemptRecord[]; delaySeconds?: number }): Promise<boolean> {
    const m = d.message!;
    try {
      const sent = await this.o.queue.enqueue([{ ...m, attempts: next.attempts, history: next.history }], next.delaySeconds ? { delaySeconds: next.delaySeconds } : {});
      if (sent.failed > 0) throw new Error('SQS refused the message');
    } catch (e) {
      // The message stays ours until its visibility passes; then it is offered again (one more receive).
      this.o.log(`job ${m.job.job_id}: could not queue it again (its message returns when its visibility passes): ${errorMessage(e)}`);
      this.held.delete(d.receiptHandle);
      return false;
    }
    this.held.delete(d.receiptHandle);
    await this.o.queue
      .delete(d.receiptHandle)
      .catch((e) => this.o.log(`job ${m.job.job_id}: could not delete its old message (a worker will find it superseded or done): ${errorMessage(e)}`));
    return true;
  }
}

export function firstLine(s: string): string {
  return s.split('\n')[0]!.slice(0, 200);
}

/** The job id an unparsed body names (`job.job_id`, when it is a short string), for a refused message's record. */
function jobIdOfBody(body: string): string | undefined {
  try {
    const id = (JSON.parse(body) as { job?: { job_id?: unknown } } | null)?.job?.job_id;
    return typeof id === 'string' ? id.slice(0, 200) : undefined;
  } catch {
    return undefined;
  }
}

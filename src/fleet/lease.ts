/**
 * A worker's hold on one job's message while its sample runs (the heartbeat): the message's
 * visibility is extended by `fleet.visibility_timeout` every third of it, for at most
 * `fleet.heartbeat_cap` seconds (default 6 h), so a hung job still reaches another worker. A
 * failed extension is only logged: another worker may then get the job, and results are keyed
 * by job (first writer wins).
 */
import { errorMessage } from '../errors.js';
import type { JobQueue } from './types.js';

export interface LeaseOptions {
  queue: JobQueue;
  receiptHandle: string;
  jobId: string;
  /** Seconds each extension buys (fleet.visibility_timeout). */
  visibilitySeconds: number;
  /** Seconds after which the lease is no longer extended (fleet.heartbeat_cap). */
  capSeconds: number;
  log: (line: string) => void;
}

export class Lease {
  private timer?: NodeJS.Timeout;

  constructor(private readonly o: LeaseOptions) {}

  /** Starts extending; returns this. */
  start(): this {
    const { visibilitySeconds: vis, capSeconds: cap } = this.o;
    const until = Date.now() + cap * 1000;
    this.timer = setInterval(() => {
      if (Date.now() + vis * 1000 > until) {
        this.stop();
        this.o.log(`job ${this.o.jobId}: running past the heartbeat cap (${cap}s); its message will be offered to another worker`);
        return;
      }
      this.o.queue
        .extend(this.o.receiptHandle, vis)
        .catch((e) => this.o.log(`job ${this.o.jobId}: heartbeat failed (another worker may get the job; results are keyed by job): ${errorMessage(e)}`));
    }, (vis * 1000) / 3);
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

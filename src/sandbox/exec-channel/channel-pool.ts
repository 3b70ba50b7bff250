import type { ExecOptions } from '../types.js';
import { encodeChannelCommand } from './channel-command.js';
import { ChannelStartError, ExecChannel } from './exec-channel.js';
import type { ExecAgentKind } from './native-agent.js';
import type { ChannelHost, ChannelOutcome, ChannelRunOptions } from './types.js';

export interface ExecChannelPoolOptions {
  host: ChannelHost;
  /** The sandbox's service name, for notices. */
  service: string;
  /** Told once per sandbox when it falls back to plain docker exec, and why. */
  onNotice?: (message: string) => void;
  /** Channels per user (default 4). */
  maxChannels?: number;
  /** How long a call waits for a busy channel before it runs with plain docker exec (default 1000 ms). */
  queueWaitMs?: number;
  /** Channels beyond the first per user close after this long unused (default 30 s). */
  idleCloseMs?: number;
  /**
   * Send stdout through a file in the container even where it could stream (default false).
   * The agent does so by itself on kernels without /proc/PID/io; this is how tests reach it.
   */
  fileStdout?: boolean;
  /** The agent channels start (default `native`, which falls back to `sh` by itself). */
  agent?: ExecAgentKind;
}

/**
 * Defaults, measured with bench/exec-channel.ts on a 2-CPU host under load (load average 6-10):
 * 50 concurrent `echo`s took 570-700 ms on one channel (queued), 370-470 ms on four, no better
 * on eight (the CPUs are the limit), against 7.3-7.7 s as 50 docker execs. Queueing alone would
 * be nearly as fast for short calls; more channels buy independence: a long command (a server
 * run in the foreground, a `sleep`) holds its channel, and calls behind it must not wait for
 * it; past `queueWaitMs` they take the plain path. Each channel keeps one docker client on the
 * host (~24 MB resident), hence the cap and the idle close.
 */
const DEFAULT_MAX_CHANNELS = 4;
const DEFAULT_QUEUE_WAIT_MS = 1_000;
const DEFAULT_IDLE_CLOSE_MS = 30_000;
/** Channels of one user that may die or fail to start in a row (no call completing in between) before that user goes plain for good. */
const MAX_FAILURES = 3;

interface Waiter {
  resolve: (ch: ExecChannel | undefined) => void;
  /** Set when the waiter queues behind busy channels; unset while a channel starts for it. */
  timer?: NodeJS.Timeout;
}

interface UserPool {
  user: string | undefined;
  idle: ExecChannel[];
  live: Set<ExecChannel>;
  starting: number;
  /** Channels started ahead of any call (warm()) that have not said hello yet. */
  warming: number;
  /** The end of the last warm start. */
  warmed?: Promise<void>;
  waiters: Waiter[];
  failures: number;
  disabled?: string;
}

/**
 * The exec channels of one sandbox, per user. A call takes an idle channel, or starts a new one
 * (up to maxChannels), or waits briefly for one to free up; whenever no channel can take it the
 * call goes plain. Every fallback is silent for the call and reported once through onNotice.
 */
export class ExecChannelPool {
  private readonly pools = new Map<string, UserPool>();
  private readonly idleTimers = new Map<ExecChannel, NodeJS.Timeout>();
  private readonly max: number;
  private readonly queueWaitMs: number;
  private readonly idleCloseMs: number;
  private noticed = false;
  private closing = false;

  constructor(private readonly options: ExecChannelPoolOptions) {
    this.max = Math.max(1, options.maxChannels ?? DEFAULT_MAX_CHANNELS);
    this.queueWaitMs = options.queueWaitMs ?? DEFAULT_QUEUE_WAIT_MS;
    this.idleCloseMs = options.idleCloseMs ?? DEFAULT_IDLE_CLOSE_MS;
  }

  /** Runs a command on a channel; `not-started` means: run it with plain docker exec instead. */
  async exec(cmd: string[], options: ExecOptions, run: ChannelRunOptions): Promise<ChannelOutcome> {
    if (this.closing) return { kind: 'not-started', reason: 'closing' };
    const command = encodeChannelCommand(cmd, options);
    if (!command) return { kind: 'not-started', reason: 'not expressible in sh' };
    const pool = this.poolFor(options.user);
    const ch = await this.acquire(pool);
    if (!ch) return { kind: 'not-started', reason: pool.disabled ?? 'no free channel' };
    try {
      const outcome = await ch.run(command, run);
      if (outcome.kind === 'done' && ch.state === 'idle') pool.failures = 0;
      return outcome;
    } finally {
      this.release(pool, ch);
    }
  }

  /**
   * Starts a channel for `user` ahead of the first call (a sample's sandbox does this for its
   * default service, and sampleInit waits for it), so no call pays the agent's start-up. Calls
   * arriving before it is ready run plain instead of waiting, and begin no other start. Resolves
   * once the start has ended, either way (a failed start sends calls plain, as without it).
   */
  warm(user?: string): Promise<void> {
    if (this.closing) return Promise.resolve();
    const pool = this.poolFor(user);
    if (pool.disabled || pool.live.size + pool.starting > 0) return pool.warmed ?? Promise.resolve();
    pool.warming++;
    pool.warmed = this.spawn(pool, true);
    return pool.warmed;
  }

  /** Live channels per user, for tests and diagnostics. */
  stats(): { user: string; live: number; idle: number; disabled?: string }[] {
    return [...this.pools.values()].map((p) => ({ user: p.user ?? '', live: p.live.size, idle: p.idle.length, disabled: p.disabled }));
  }

  /** Closes every channel; calls in flight end as `lost`. */
  async close(): Promise<void> {
    this.closing = true;
    for (const t of this.idleTimers.values()) clearTimeout(t);
    this.idleTimers.clear();
    for (const p of this.pools.values()) {
      for (const w of p.waiters.splice(0)) this.settle(w, undefined);
      for (const ch of p.live) ch.close();
      p.idle = [];
    }
  }

  private poolFor(user: string | undefined): UserPool {
    const key = user ?? '';
    let p = this.pools.get(key);
    if (!p) {
      p = { user, idle: [], live: new Set(), starting: 0, warming: 0, waiters: [], failures: 0 };
      this.pools.set(key, p);
    }
    return p;
  }

  private acquire(pool: UserPool): Promise<ExecChannel | undefined> {
    if (pool.disabled) return Promise.resolve(undefined);
    const ch = pool.idle.pop();
    if (ch) {
      clearTimeout(this.idleTimers.get(ch));
      this.idleTimers.delete(ch);
      return Promise.resolve(ch);
    }
    // The warm start is not ready yet: this call goes plain (see warm()).
    if (pool.warming > 0) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const w: Waiter = { resolve };
      if (pool.live.size + pool.starting < this.max) {
        this.spawn(pool, false);
      } else {
        w.timer = setTimeout(() => {
          const i = pool.waiters.indexOf(w);
          if (i >= 0) pool.waiters.splice(i, 1);
          resolve(undefined);
        }, this.queueWaitMs);
      }
      pool.waiters.push(w);
    });
  }

  /** Starts a channel; `warm` when no call waits for it (warm()). Resolves when the start has ended. */
  private spawn(pool: UserPool, warm: boolean): Promise<void> {
    pool.starting++;
    return ExecChannel.start(this.options.host, pool.user, this.options.fileStdout, this.options.agent).then(
      (ch) => {
        pool.starting--;
        if (warm) pool.warming--;
        if (this.closing) return ch.close();
        pool.live.add(ch);
        ch.onClosed(() => this.onClosed(pool, ch));
        this.release(pool, ch);
      },
      (e: unknown) => {
        pool.starting--;
        // A warm start had no waiter: nobody is to be sent plain.
        if (warm) pool.warming--;
        // Starts cut short by close() (the container going away with the sample) are no failures.
        if (this.closing) return;
        const reason = (e as Error).message;
        // A refusal is about what this image offers this user (tools, a writable temp dir):
        // no retry for that user; other users may still work.
        if ((e instanceof ChannelStartError && e.kind === 'image') || ++pool.failures >= MAX_FAILURES) this.disableUser(pool, reason);
        // The waiter this start was for runs plain; others keep waiting for busy channels.
        const i = warm ? -1 : pool.waiters.findIndex((w) => !w.timer);
        if (i >= 0) this.settle(pool.waiters.splice(i, 1)[0]!, undefined);
      },
    );
  }

  private release(pool: UserPool, ch: ExecChannel): void {
    if (ch.state !== 'idle') return;
    const w = pool.waiters.shift();
    if (w) return this.settle(w, ch);
    pool.idle.push(ch);
    if (pool.live.size > 1) {
      const t = setTimeout(() => {
        this.idleTimers.delete(ch);
        const i = pool.idle.indexOf(ch);
        if (i >= 0 && pool.live.size > 1) {
          pool.idle.splice(i, 1);
          ch.close();
        }
      }, this.idleCloseMs);
      t.unref();
      this.idleTimers.set(ch, t);
    }
  }

  private onClosed(pool: UserPool, ch: ExecChannel): void {
    pool.live.delete(ch);
    const i = pool.idle.indexOf(ch);
    if (i >= 0) pool.idle.splice(i, 1);
    clearTimeout(this.idleTimers.get(ch));
    this.idleTimers.delete(ch);
    if (this.closing || ch.closeReason === 'closed') return;
    if (++pool.failures >= MAX_FAILURES) this.disableUser(pool, `channel died ${pool.failures} times, last: ${ch.closeReason}`);
  }

  private settle(w: Waiter, ch: ExecChannel | undefined): void {
    clearTimeout(w.timer);
    w.resolve(ch);
  }

  private disableUser(pool: UserPool, reason: string): void {
    if (pool.disabled) return;
    pool.disabled = reason;
    for (const w of pool.waiters.splice(0)) this.settle(w, undefined);
    this.notice(`${this.options.service}${pool.user ? ` (user ${pool.user})` : ''}: ${reason}`);
  }

  private notice(what: string): void {
    if (this.noticed) return;
    this.noticed = true;
    this.options.onNotice?.(`exec channel off for ${what}; using docker exec instead`);
  }
}

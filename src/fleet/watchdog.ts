/**
 * The controller's watch on progress: a warning after `fleet.stale_warning_minutes` (10) without
 * a finished job, repeated every as many minutes, and the fleet stopped after
 * `fleet.stale_teardown_minutes` (180), results kept. Time comes from `now` (injectable).
 */
export interface WatchdogOptions {
  warningMinutes: number;
  teardownMinutes: number;
  /** A warning: minutes without progress. */
  onWarning: (idleMinutes: number) => void;
  /** The teardown: minutes without progress. */
  onTeardown: (idleMinutes: number) => void;
  now?: () => number;
}

export class Watchdog {
  private readonly now: () => number;
  private lastProgress: number;
  private lastDone = -1;
  private warnedAt = 0;

  constructor(private readonly o: WatchdogOptions) {
    this.now = o.now ?? Date.now;
    this.lastProgress = this.now();
  }

  /** Called on every check with the finished count; true when the fleet has gone too long without progress. */
  check(done: number): boolean {
    const now = this.now();
    if (done !== this.lastDone) {
      this.lastDone = done;
      this.lastProgress = now;
      return false;
    }
    const idle = now - this.lastProgress;
    const mins = Math.round((idle / 60_000) * 10) / 10;
    if (idle >= this.o.teardownMinutes * 60_000) {
      this.o.onTeardown(mins);
      return true;
    }
    if (idle >= this.o.warningMinutes * 60_000 && now - this.warnedAt >= this.o.warningMinutes * 60_000) {
      this.warnedAt = now;
      this.o.onWarning(mins);
    }
    return false;
  }
}

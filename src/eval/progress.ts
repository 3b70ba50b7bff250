import cliProgress from 'cli-progress';
import { redactSecrets } from '../config/secret-registry.js';

export interface FinishedSample {
  id: string;
  epoch: number;
  /** 'C'/'I' per scored key, e.g. {main_task_success: 'C'}. */
  scores?: Record<string, string>;
  error?: string;
  seconds: number;
  /** Interpreters or shells the agent changed (the score's `tampered` metadata). */
  tampered?: string[];
}

/** What the runner tells the person watching. */
export interface ProgressReporter {
  start(total: number): void;
  sampleStarted(id: string, epoch: number): void;
  sampleFinished(s: FinishedSample): void;
  /** A one-off line (warnings, cancellation). */
  note(text: string): void;
  stop(): void;
}

/** A live bar on a terminal; plain lines (one per finished sample, plus a heartbeat) elsewhere. */
export function createProgress(stream: NodeJS.WriteStream = process.stderr, quiet = false): ProgressReporter {
  if (quiet) return silentProgress();
  return stream.isTTY ? new BarProgress(stream) : new LineProgress(stream);
}

export function silentProgress(): ProgressReporter {
  return { start() {}, sampleStarted() {}, sampleFinished() {}, note() {}, stop() {} };
}

class Counts {
  total = 0;
  done = 0;
  running = 0;
  failed = 0;
  readonly started = Date.now();
  elapsed(): string {
    const s = Math.floor((Date.now() - this.started) / 1000);
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
  }
}

function describe(s: FinishedSample): string {
  const what = s.error
    ? `ERROR ${s.error.split('\n')[0]!.slice(0, 160)}`
    : Object.entries(s.scores ?? {})
        .map(([k, v]) => `${k.replace('_task_success', '')}=${v}`)
        .join(' ');
  return `${s.id} (epoch ${s.epoch}) ${what} ${s.seconds.toFixed(1)}s`;
}

class LineProgress implements ProgressReporter {
  private readonly c = new Counts();
  private timer?: NodeJS.Timeout;
  private lastLine = Date.now();
  /** A heartbeat line after this long without one (default 30 s). */
  private static readonly HEARTBEAT_MS = 30_000;

  constructor(private readonly out: NodeJS.WriteStream) {}

  private line(text: string): void {
    this.out.write(`${redactSecrets(text)}\n`);
    this.lastLine = Date.now();
  }

  start(total: number): void {
    this.c.total = total;
    this.line(`running ${total} sample(s)`);
    this.timer = setInterval(() => {
      if (Date.now() - this.lastLine >= LineProgress.HEARTBEAT_MS) this.line(this.status());
    }, 5_000);
    this.timer.unref();
  }

  private status(): string {
    const { done, total, running, failed } = this.c;
    return `[${done}/${total}] running ${running}, failed ${failed}, elapsed ${this.c.elapsed()}`;
  }

  sampleStarted(): void {
    this.c.running++;
  }

  sampleFinished(s: FinishedSample): void {
    this.c.running--;
    this.c.done++;
    if (s.error) this.c.failed++;
    this.line(`[${this.c.done}/${this.c.total}] ${describe(s)}`);
  }

  note(text: string): void {
    this.line(text);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

class BarProgress implements ProgressReporter {
  private readonly c = new Counts();
  private bar?: cliProgress.SingleBar;
  private timer?: NodeJS.Timeout;

  constructor(private readonly out: NodeJS.WriteStream) {}

  start(total: number): void {
    this.c.total = total;
    this.bar = new cliProgress.SingleBar(
      {
        stream: this.out,
        format: '{bar} {value}/{total} | running {running} | failed {failed} | {elapsed}',
        hideCursor: true,
        clearOnComplete: false,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar.start(total, 0, this.payload());
    this.timer = setInterval(() => this.bar?.update(this.c.done, this.payload()), 1000);
    this.timer.unref();
  }

  private payload() {
    return { running: this.c.running, failed: this.c.failed, elapsed: this.c.elapsed() };
  }

  sampleStarted(): void {
    this.c.running++;
    this.bar?.update(this.c.done, this.payload());
  }

  sampleFinished(s: FinishedSample): void {
    this.c.running--;
    this.c.done++;
    if (s.error) {
      this.c.failed++;
      this.note(describe(s));
    }
    this.bar?.update(this.c.done, this.payload());
  }

  note(text: string): void {
    // Printed above the bar so it stays visible.
    this.out.write(`\r\x1b[K${redactSecrets(text)}\n`);
    this.bar?.render();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.bar?.stop();
  }
}

/**
 * What the controller shows while a fleet runs: done / failed / in flight / workers / elapsed /
 * cost so far. A live bar on a terminal; elsewhere a line whenever the counts change, and at
 * least every `heartbeatMs` (default 30 s) so a log shows the fleet is alive.
 */
import cliProgress from 'cli-progress';

export interface FleetCounts {
  total: number;
  done: number;
  failed: number;
  inFlight: number;
  /** Workers alive (local, ec2), or seen reporting (external), or undefined before any is known. */
  workers: number | undefined;
  /** USD so far. */
  cost: number;
  /** Workers started so far, dead and replaced ones included (EC2; absent: not shown). */
  launched?: number;
  /** Worker instance-hours so far (EC2; absent: not shown). */
  workerHours?: number;
}

export interface FleetProgress {
  update(c: FleetCounts): void;
  note(text: string): void;
  stop(): void;
}

export function createFleetProgress(stream: NodeJS.WriteStream, quiet: boolean, heartbeatMs = 30_000): FleetProgress {
  if (quiet) return { update() {}, note() {}, stop() {} };
  return stream.isTTY ? new BarFleetProgress(stream) : new LineFleetProgress(stream, heartbeatMs);
}

function elapsed(started: number): string {
  const s = Math.floor((Date.now() - started) / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

function fields(c: FleetCounts, started: number) {
  return {
    failed: c.failed,
    inFlight: c.inFlight,
    workers: (c.workers === undefined ? '?' : String(c.workers)) + (c.launched !== undefined && c.launched !== c.workers ? ` (launched ${c.launched})` : ''),
    hours: c.workerHours !== undefined ? `${c.workerHours.toFixed(1)} instance-h` : '',
    elapsed: elapsed(started),
    cost: `$${c.cost.toFixed(2)}`,
  };
}

class LineFleetProgress implements FleetProgress {
  private readonly started = Date.now();
  private last = '';
  private lastAt = 0;

  constructor(
    private readonly out: NodeJS.WriteStream,
    private readonly heartbeatMs: number,
  ) {}

  update(c: FleetCounts): void {
    const f = fields(c, this.started);
    const key = `${c.done}/${c.failed}/${c.inFlight}/${f.workers}`;
    if (key === this.last && Date.now() - this.lastAt < this.heartbeatMs) return;
    this.last = key;
    this.lastAt = Date.now();
    this.out.write(`[${c.done}/${c.total}] done ${c.done}, failed ${f.failed}, in flight ${f.inFlight}, workers ${f.workers}${f.hours ? `, ${f.hours}` : ''}, elapsed ${f.elapsed}, cost ${f.cost}\n`);
  }

  note(text: string): void {
    this.out.write(`${text}\n`);
  }

  stop(): void {}
}

class BarFleetProgress implements FleetProgress {
  private readonly started = Date.now();
  private bar?: cliProgress.SingleBar;

  constructor(private readonly out: NodeJS.WriteStream) {}

  update(c: FleetCounts): void {
    if (!this.bar) {
      this.bar = new cliProgress.SingleBar(
        {
          stream: this.out,
          format: `{bar} {value}/{total} | failed {failed} | in flight {inFlight} | workers {workers}${c.workerHours !== undefined ? ' | {hours}' : ''} | {elapsed} | {cost}`,
          hideCursor: true,
          clearOnComplete: false,
        },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(c.total, c.done, fields(c, this.started));
    }
    this.bar.update(c.done, fields(c, this.started));
  }

  note(text: string): void {
    if (this.bar) this.bar.stop();
    this.out.write(`${text}\n`);
    this.bar = undefined;
  }

  stop(): void {
    this.bar?.stop();
  }
}

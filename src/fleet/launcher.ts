/**
 * Launchers: what starts a fleet's workers (`--workers KIND`).
 *
 *   local:N    N `ct fleet worker` processes on this machine (they share its Docker)
 *   external   nothing: the controller prints the command to start workers elsewhere
 *   ec2        EC2 instances that bootstrap a worker (ec2-launcher.ts)
 *
 * Each implements `WorkerLauncher` (fleet/types.ts); `names` and `workerCommand` add what the
 * controller's messages and events show.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readSync, fstatSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors.js';
import { availableCpus } from '../eval/capacity.js';
import type { WorkerLauncher } from './types.js';

/** A launcher as the controller uses it. */
export interface FleetLauncher extends WorkerLauncher {
  /** Names of the workers started so far (local-1, local-2, ...). */
  names(): string[];
  /** How a user starts a worker by hand, for messages. */
  workerCommand(): string;
  /** Why the last worker that exited with an error did (its log's last line), if one did. */
  lastFailure?(): string | undefined;
}

/** `--workers` parsed: `local:N`, `external` or `ec2`. */
export type WorkersSpec = { kind: 'local'; count: number } | { kind: 'external' } | { kind: 'ec2' };

/** Parses `--workers`; malformed values are a ConfigError naming the accepted forms. */
export function parseWorkersSpec(value: string): WorkersSpec {
  if (value === 'external') return { kind: 'external' };
  if (value === 'ec2') return { kind: 'ec2' };
  // Any count parses; whether it may run is `fleetWorkerCount`'s to say, naming the limit.
  const m = /^local:([1-9][0-9]{0,5})$/.exec(value);
  if (m) return { kind: 'local', count: Number(m[1]) };
  throw new ConfigError(`--workers ${value}: expected local:N (N worker processes on this machine, 1 or more), external, or ec2`);
}

/**
 * Local worker processes per CPU at most. Each worker already runs several samples at once
 * (`--max-samples`, else its adaptive share of this machine); past a few processes per CPU, more of them add memory and
 * Docker load on this one machine, not throughput.
 */
export const LOCAL_WORKERS_PER_CPU = 4;

/** `ct run eval --help`: how many workers a fleet may have, and what happens past that. */
export const WORKER_LIMITS_HELP =
  'Fleet worker limits:\n' +
  '  --workers local:N starts exactly N worker processes here. N above --max-workers (fleet.max_workers,\n' +
  `  CT_FLEET_MAX_WORKERS) or above ${LOCAL_WORKERS_PER_CPU} per CPU of this machine is refused (exit 2), never cut down:\n` +
  '  raise --max-workers, or --max-samples (samples each worker runs at once), or run workers on other\n' +
  '  machines (--workers external, --ec2). EC2 workers: as many as the backlog needs for one wave at\n' +
  '  first, then more while busy workers cannot finish the queue in fleet.scale_waves waves\n' +
  '  (CT_FLEET_SCALE_WAVES, 2), at most --max-workers. Each worker adapts its samples at once to its\n' +
  '  machine (up to fleet.max_concurrency, CT_FLEET_MAX_CONCURRENCY, 32) unless --concurrency or\n' +
  '  --max-samples fix it, and leaves after fleet.idle_minutes (CT_FLEET_IDLE_MINUTES, 10) without a job.\n';

export interface WorkerLimits {
  /** The run's limit: --max-workers, else fleet.max_workers. */
  maxWorkers: number;
  /** The limit came from --max-workers (else from fleet.max_workers), for the message. */
  fromFlag: boolean;
  /** This machine's CPUs; default: those this process may use (cgroup limits included). */
  cpus?: number;
}

/**
 * The workers a fleet runs at most. `local:N` runs exactly N: more than the run's limit, or more
 * than LOCAL_WORKERS_PER_CPU per CPU here, is a ConfigError (exit 2) naming the limit and what
 * raises it, so a run never gets fewer workers than it asked for without saying so. External
 * and EC2 workers: the limit (EC2 launches only what the backlog needs).
 */
export function fleetWorkerCount(spec: WorkersSpec, limits: WorkerLimits): number {
  if (spec.kind !== 'local') return limits.maxWorkers;
  const n = spec.count;
  if (n > limits.maxWorkers) {
    throw new ConfigError(
      limits.fromFlag
        ? `--workers local:${n} asks for ${n} worker processes, more than --max-workers ${limits.maxWorkers}; ask for fewer, or raise --max-workers to ${n}`
        : `--workers local:${n} asks for ${n} worker processes, more than the limit of ${limits.maxWorkers} (fleet.max_workers); ` +
            `ask for fewer, or raise the limit: --max-workers ${n}, fleet.max_workers in ct.config.yml, or CT_FLEET_MAX_WORKERS`,
    );
  }
  const cpus = limits.cpus ?? availableCpus();
  const bound = Math.max(1, Math.floor(cpus * LOCAL_WORKERS_PER_CPU));
  if (n > bound) {
    throw new ConfigError(
      `--workers local:${n} asks for ${n} worker processes on this machine, which has ${cpus} CPU(s): at most ${bound} local workers (${LOCAL_WORKERS_PER_CPU} per CPU). ` +
        'Each worker runs --max-samples samples at once: raise that for more at once here, or run workers on other machines (--workers external, or --ec2)',
    );
  }
  return n;
}

/**
 * The command a worker runs for this fleet. It carries no secret: a worker elsewhere reads the
 * fleet's SSM parameters; `secrets: 'env'` (local workers) makes it use only its environment.
 */
export function workerCommandLine(fleetId: string, region: string, o: { concurrency?: number; secrets?: 'env'; exitWithParent?: boolean; waitForFleetSeconds?: number } = {}): string[] {
  return [
    'fleet',
    'worker',
    '--fleet',
    fleetId,
    '--region',
    region,
    ...(o.concurrency !== undefined ? ['--concurrency', String(o.concurrency)] : []),
    ...(o.secrets ? ['--secrets', o.secrets] : []),
    ...(o.exitWithParent ? ['--exit-with-parent'] : []),
    ...(o.waitForFleetSeconds ? ['--wait-for-fleet', String(o.waitForFleetSeconds)] : []),
  ];
}

/** The package's `ct` entry point (bin/ct.js), run with this Node. */
const CT_BIN = fileURLToPath(new URL('../../../bin/ct.js', import.meta.url));

export interface LocalLauncherOptions {
  fleetId: string;
  region: string;
  /** Samples each worker runs at once, fixed (`--concurrency`); absent: each starts from the manifest's samples_per_worker and adapts. */
  concurrency?: number;
  /** Workers run here (relative policy paths and settings resolve as for the controller). */
  cwd: string;
  /** The controller's environment: AWS settings, API keys and CT_* reach workers this way only (no SSM). */
  env: NodeJS.ProcessEnv;
  /** Each worker's stdout and stderr go to `<logDir>/worker-<n>.log`. */
  logDir: string;
  /** Started ahead of the fleet's setup: each waits this long for the manifest and queues (`--wait-for-fleet`). */
  waitForFleetSeconds?: number;
}

/**
 * `local:N`: worker processes on this machine. Each writes its log straight to its file and
 * holds a pipe from the controller on its stdin (`--exit-with-parent`): when the controller
 * dies, however it dies, the pipe closes and the worker hands its jobs back and stops. The
 * controller does not wait for its workers when the fleet completes: they see the queues gone.
 */
export class LocalLauncher implements FleetLauncher {
  readonly kind = 'local' as const;
  private readonly started_: string[] = [];
  private failure?: string;
  private readonly children = new Map<string, ChildProcess>();
  private started = 0;
  private abnormal = 0;

  constructor(private readonly o: LocalLauncherOptions) {}

  async start(count: number): Promise<number> {
    mkdirSync(this.o.logDir, { recursive: true });
    for (let i = 0; i < count; i++) {
      const n = ++this.started;
      const name = `local-${n}`;
      const logFile = join(this.o.logDir, `worker-${n}.log`);
      const fd = openSync(logFile, 'a');
      const child = spawn(process.execPath, [CT_BIN, ...workerCommandLine(this.o.fleetId, this.o.region, { ...(this.o.concurrency !== undefined ? { concurrency: this.o.concurrency } : {}), secrets: 'env', exitWithParent: true, ...(this.o.waitForFleetSeconds ? { waitForFleetSeconds: this.o.waitForFleetSeconds } : {}) })], {
        cwd: this.o.cwd,
        env: { ...this.o.env, CT_WORKER_NAME: name },
        stdio: ['pipe', fd, fd],
      });
      closeSync(fd);
      // The pipe only signals the controller's life; nothing is written to it.
      child.stdin!.on('error', () => {});
      this.children.set(name, child);
      child.once('exit', (code, signal) => {
        this.children.delete(name);
        if (code !== 0 || signal !== null) this.abnormal++;
        if (code !== 0 && code !== null) {
          const last = tailOf(logFile).trim().split('\n').pop() ?? '';
          this.failure = `${name} exited with ${code}: ${last.replace(/^\S+Z /, '')} (log: ${logFile})`;
        }
      });
      this.started_.push(name);
    }
    return count;
  }

  /** Lets the controller's process end while workers still wind down (their stdin pipe then closes). */
  detach(): void {
    for (const c of this.children.values()) {
      c.unref();
      (c.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    }
  }

  async alive(): Promise<number> {
    return [...this.children.values()].filter((c) => c.exitCode === null && c.signalCode === null).length;
  }

  names(): string[] {
    return [...this.started_];
  }

  lastFailure(): string | undefined {
    return this.failure;
  }

  /** Workers that exited with an error or were killed: they may have left sandboxes behind. */
  abnormalExits(): number {
    return this.abnormal;
  }

  /** Process ids of the running workers (tests and the events log name them). */
  pids(): Record<string, number> {
    return Object.fromEntries([...this.children.entries()].map(([n, c]) => [n, c.pid!]));
  }

  /** SIGTERM to every worker still running, SIGKILL after `graceMs` (default 20 s: a worker cancels its samples and tears down). */
  async stopAll(graceMs = 20_000): Promise<void> {
    const alive = [...this.children.values()].filter((c) => c.exitCode === null && c.signalCode === null);
    await Promise.all(
      alive.map(
        (c) =>
          new Promise<void>((resolve) => {
            const timer = setTimeout(() => c.kill('SIGKILL'), graceMs);
            c.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
            c.kill('SIGTERM');
          }),
      ),
    );
  }

  workerCommand(): string {
    return `ct ${workerCommandLine(this.o.fleetId, this.o.region, { ...(this.o.concurrency !== undefined ? { concurrency: this.o.concurrency } : {}), secrets: 'env' }).join(' ')}`;
  }
}

/** The last 2 KB of a file ('' when it cannot be read). */
function tailOf(path: string): string {
  try {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      const buf = Buffer.alloc(Math.min(2000, size));
      readSync(fd, buf, 0, buf.length, size - buf.length);
      return buf.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

/** `external`: the user starts workers on their own machines; nothing is launched here. */
export class ExternalLauncher implements FleetLauncher {
  readonly kind = 'external' as const;

  constructor(private readonly o: { fleetId: string; region: string }) {}

  async start(): Promise<number> {
    return 0;
  }

  async alive(): Promise<undefined> {
    return undefined;
  }

  names(): string[] {
    return [];
  }

  async stopAll(): Promise<void> {}

  workerCommand(): string {
    return `ct ${workerCommandLine(this.o.fleetId, this.o.region).join(' ')}`;
  }
}

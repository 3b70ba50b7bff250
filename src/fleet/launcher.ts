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
  const m = /^local:([1-9][0-9]{0,2})$/.exec(value);
  if (m) return { kind: 'local', count: Number(m[1]) };
  throw new ConfigError(`--workers ${value}: expected local:N (N from 1 to 999 worker processes on this machine), external, or ec2`);
}

/**
 * The command a worker runs for this fleet. It carries no secret: a worker elsewhere reads the
 * fleet's SSM parameters; `secrets: 'env'` (local workers) makes it use only its environment.
 */
export function workerCommandLine(fleetId: string, region: string, o: { concurrency?: number; secrets?: 'env'; exitWithParent?: boolean } = {}): string[] {
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
  ];
}

/** The package's `ct` entry point (bin/ct.js), run with this Node. */
const CT_BIN = fileURLToPath(new URL('../../../bin/ct.js', import.meta.url));

export interface LocalLauncherOptions {
  fleetId: string;
  region: string;
  concurrency: number;
  /** Workers run here (relative policy paths and settings resolve as for the controller). */
  cwd: string;
  /** The controller's environment: AWS settings, API keys and CT_* reach workers this way only (no SSM). */
  env: NodeJS.ProcessEnv;
  /** Each worker's stdout and stderr go to `<logDir>/worker-<n>.log`. */
  logDir: string;
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
      const child = spawn(process.execPath, [CT_BIN, ...workerCommandLine(this.o.fleetId, this.o.region, { concurrency: this.o.concurrency, secrets: 'env', exitWithParent: true })], {
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
    return `ct ${workerCommandLine(this.o.fleetId, this.o.region, { concurrency: this.o.concurrency, secrets: 'env' }).join(' ')}`;
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

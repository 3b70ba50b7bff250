import { EngineExec } from './engine-exec.js';
import type { CommandRunner, RunOptions, RunResult } from '../../host/command-runner.js';
import { SandboxUnavailableError } from '../../errors.js';
import { backoffDelays, sleep } from '../../host/backoff.js';

/** Default limit for one docker CLI call that is not an exec (inspect, ps, network, rm). */
const DEFAULT_CALL_TIMEOUT_MS = 60_000;

export interface DockerCallOptions extends RunOptions {
  /** Retry on timeouts and daemon hiccups. Only for calls that are safe to repeat. */
  idempotent?: boolean;
  /** Attempts for idempotent calls (default 3). */
  attempts?: number;
}

/**
 * The `docker` CLI on a host (local or remote). Every call has a timeout; idempotent calls are
 * retried a bounded number of times, others never (compose `up` of a half-started project and
 * setup scripts must not run twice).
 */
export class DockerCli {
  /** The local engine's API, for the exec channels (EngineExec); unset for remote hosts. */
  readonly engine?: EngineExec;

  /**
   * `engineApi: false` keeps every call on the CLI, `directChannels: false` the exec channels on
   * their execs' streams (tests and benches compare them).
   */
  constructor(
    readonly runner: CommandRunner,
    readonly binary = 'docker',
    options: { engineApi?: boolean; directChannels?: boolean } = {},
  ) {
    if (runner.target === 'local' && binary === 'docker' && options.engineApi !== false) {
      this.engine = EngineExec.local(process.env, { direct: options.directChannels });
    }
  }

  async call(args: string[], options: DockerCallOptions = {}): Promise<RunResult> {
    const attempts = options.idempotent ? (options.attempts ?? 3) : 1;
    const delays = backoffDelays(attempts - 1, 250, 4000);
    let last: RunResult | undefined;
    for (let i = 0; i < attempts; i++) {
      last = await this.runner.run([this.binary, ...args], {
        timeoutMs: DEFAULT_CALL_TIMEOUT_MS,
        ...options,
      });
      if (!last.timedOut && !isTransientDaemonError(last)) return last;
      if (options.signal?.aborted) break;
      if (i < attempts - 1) await sleep(delays[i]!);
    }
    return last!;
  }

  /** Runs a call that must succeed; throws SandboxUnavailableError with docker's own words. */
  async ok(args: string[], options: DockerCallOptions = {}): Promise<string> {
    const r = await this.call(args, options);
    if (r.timedOut) {
      throw new SandboxUnavailableError(
        `docker ${args.slice(0, 3).join(' ')} did not finish within ${Math.round((options.timeoutMs ?? DEFAULT_CALL_TIMEOUT_MS) / 1000)} s (${this.runner.target})`,
      );
    }
    if (r.code !== 0) {
      throw new SandboxUnavailableError(
        `docker ${args.slice(0, 3).join(' ')} failed (${this.runner.target}): ${lastLines(r.stderr.toString('utf8') || r.stdout.toString('utf8'))}`,
      );
    }
    return r.stdout.toString('utf8');
  }
}

function isTransientDaemonError(r: RunResult): boolean {
  if (r.code === 0) return false;
  const err = r.stderr.toString('utf8');
  return /Cannot connect to the Docker daemon|connection reset by peer|i\/o timeout|TLS handshake timeout/i.test(err);
}

/** The last few lines of a command's output, for error messages. */
export function lastLines(text: string, n = 8): string {
  const lines = text.trim().split('\n');
  return lines.slice(-n).join('\n');
}

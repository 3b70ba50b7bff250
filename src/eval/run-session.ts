/**
 * The run session: what every process that runs samples needs around them, whoever schedules
 * them (the local runner, a fleet worker, a fleet controller).
 *
 *   open:   new run id -> sandbox provider (+ preflight) -> run record in the RunRegistry
 *           -> signal handlers -> sweep leftovers of runs that were killed
 *   run:    `signal` aborts on the first SIGINT/SIGTERM (no new samples; running ones stop and
 *           are torn down); the second one is a forced stop: forced-stop hooks (e.g. finish the
 *           log as cancelled) and teardown get FORCED_STOP_MS, the run record is marked abandoned
 *           so the next sweep removes whatever is left, and the process exits.
 *   close:  sandbox teardown -> provider close -> run record removed -> signal handlers removed.
 *
 * States: open -> stopping (first signal or stop()) -> closed; open|stopping -> forced (exits).
 */
import type { Config } from '../config/config.js';
import { errorMessage } from '../errors.js';
import { createProvider } from '../sandbox/registry.js';
import { RunRegistry, newRunId } from '../sandbox/run-registry.js';
import type { SandboxEnvSpec, SandboxProvider } from '../sandbox/types.js';

/** Exit codes of a run stopped by a signal: 128 + the signal's number, as shells report them. */
export const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;
export type StopSignal = keyof typeof SIGNAL_EXIT_CODES;

/** How long a forced stop waits for its hooks and sandbox teardown before exiting (15 s). */
const FORCED_STOP_MS = 15_000;

export interface RunSessionOptions {
  config: Config;
  /** The `--sandbox` value: docker, local, ssh://user@host[:port], ec2. */
  sandbox: string;
  /** One-off console lines (stop messages, sandbox notices, leftovers swept). */
  note: (text: string) => void;
  /** Listen for SIGINT and SIGTERM (default true). */
  handleSignals?: boolean;
  /** Ends the process on a forced stop (default `process.exit`). */
  exit?: (code: number) => void;
}

export type RunSessionState = 'open' | 'stopping' | 'forced' | 'closed';

export class RunSession {
  readonly runId: string;
  readonly provider: SandboxProvider;
  readonly registry: RunRegistry;
  private readonly ac = new AbortController();
  private state: RunSessionState = 'open';
  private stopSignal?: StopSignal;
  private readonly forcedStopHooks = new Set<() => Promise<void>>();
  private readonly environments = new Map<string, Promise<void>>();
  private readonly onSigint = () => this.onSignal('SIGINT');
  private readonly onSigterm = () => this.onSignal('SIGTERM');

  private constructor(
    private readonly options: RunSessionOptions,
    runId: string,
    provider: SandboxProvider,
    registry: RunRegistry,
  ) {
    this.runId = runId;
    this.provider = provider;
    this.registry = registry;
  }

  /**
   * Opens a session: creates the sandbox provider (failing with instructions when its host is not
   * usable), registers the run, installs the signal handlers and sweeps leftovers of killed runs.
   */
  static async open(options: RunSessionOptions): Promise<RunSession> {
    const runId = newRunId();
    const registry = new RunRegistry(options.config.state_dir);
    // Sandbox notices also go into each sample's log; the console shows each distinct one once.
    const noted = new Set<string>();
    const onNotice = (m: string) => {
      if (noted.has(m)) return;
      noted.add(m);
      options.note(m);
    };
    const provider = await createProvider(options.sandbox, { config: options.config, runId, registry, onNotice });
    await provider.preflight?.();
    registry.register(runId);
    const session = new RunSession(options, runId, provider, registry);
    if (options.handleSignals ?? true) {
      process.on('SIGINT', session.onSigint);
      process.on('SIGTERM', session.onSigterm);
    }
    const swept = await provider.sweep().catch(() => ({ removed: [] as string[] }));
    if (swept.removed.length) options.note(`removed ${swept.removed.length} leftover sandbox(es) of runs that were killed`);
    return session;
  }

  /** Aborted on the first SIGINT/SIGTERM (or `stop()`): take no new samples, stop running ones. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** The signal that stopped the run, if one did. */
  get stoppedBy(): StopSignal | undefined {
    return this.stopSignal;
  }

  /** The process exit code for a run that was stopped (130 for SIGINT or stop(), 143 for SIGTERM). */
  get stoppedExitCode(): number {
    return SIGNAL_EXIT_CODES[this.stopSignal ?? 'SIGINT'];
  }

  /** Stops the run gracefully, as the first Ctrl-C does. */
  stop(): void {
    if (this.state !== 'open') return;
    this.state = 'stopping';
    this.ac.abort();
  }

  /**
   * Builds an environment's images (the provider's taskInit) once per session; every sample of
   * the environment awaits the same outcome, so a failed build fails exactly that environment's
   * samples, each with the build's error, and is not retried per sample.
   */
  prepareEnvironment(env: SandboxEnvSpec): Promise<void> {
    let p = this.environments.get(env.composeFile);
    if (!p) {
      p = this.provider.taskInit(env, this.signal);
      this.environments.set(env.composeFile, p);
      p.catch(() => {});
    }
    return p;
  }

  /**
   * Work a forced stop does before the process exits (bounded with sandbox teardown by
   * FORCED_STOP_MS), e.g. finishing the log as cancelled. Returns a function that removes it.
   */
  onForcedStop(hook: () => Promise<void>): () => void {
    this.forcedStopHooks.add(hook);
    return () => this.forcedStopHooks.delete(hook);
  }

  /** Tears down what the run still has, releases the provider, removes the run record. */
  async close(): Promise<void> {
    if (this.state === 'closed' || this.state === 'forced') return;
    this.state = 'closed';
    try {
      await this.provider.taskCleanup().catch(() => {});
      await this.provider.close?.().catch(() => {});
      this.registry.unregister(this.runId);
    } finally {
      process.off('SIGINT', this.onSigint);
      process.off('SIGTERM', this.onSigterm);
    }
  }

  private onSignal(signal: StopSignal): void {
    if (this.state === 'open') {
      this.stopSignal = signal;
      this.options.note('Stopping: no new samples; tearing down running sandboxes (press Ctrl-C again to force)...');
      this.stop();
      return;
    }
    if (this.state !== 'stopping') return;
    this.state = 'forced';
    this.stopSignal ??= signal;
    this.options.note('Forced stop: removing sandboxes and exiting.');
    // Marked before teardown: whatever teardown does not reach (a project still being created,
    // the time running out) is the next run's or `ct sandbox cleanup`'s to sweep.
    try {
      this.registry.abandon(this.runId);
    } catch (e) {
      this.options.note(`could not mark the run as stopped: ${errorMessage(e)}`);
    }
    const work = Promise.allSettled([...[...this.forcedStopHooks].map((h) => h()), this.provider.taskCleanup()]);
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise((r) => (timer = setTimeout(r, FORCED_STOP_MS)));
    void Promise.race([work, limit]).finally(async () => {
      clearTimeout(timer);
      await Promise.race([this.provider.close?.().catch(() => {}), new Promise((r) => setTimeout(r, 2_000))]);
      (this.options.exit ?? process.exit)(this.stoppedExitCode);
    });
  }
}

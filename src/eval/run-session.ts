/**
 * The run session: what every process that runs samples needs around them, whoever schedules
 * them (the local runner, a fleet worker), and what a fleet controller needs around its run.
 *
 *   open:   new run id -> sandbox provider (+ preflight; none for a controller) -> run record in
 *           the RunRegistry -> signal handlers -> sweep leftovers of runs that were killed
 *   first SIGINT/SIGTERM (or stop()/drain()):
 *           `stopping` aborts (take no new work); with firstSignal 'cancel' (the default)
 *           `signal` aborts too (running samples stop and are torn down), with 'drain' running
 *           samples finish (a fleet worker).
 *   second: forced stop. `signal` aborts, the run record is marked abandoned (so the next sweep
 *           removes whatever is left), forced-stop hooks (e.g. finish the log as cancelled) and
 *           sandbox teardown get FORCED_STOP_MS, and the process exits 130 (SIGINT) or 143 (SIGTERM).
 *   close:  sandbox teardown -> provider close -> run record removed -> signal handlers removed.
 *
 * States: open -> draining -> stopping -> closed (each step optional); any but closed -> forced.
 */
import { setMaxListeners } from 'node:events';
import type { Config } from '../config/config.js';
import { errorMessage } from '../errors.js';
import { HeldProvider } from '../sandbox/held-provider.js';
import { createProvider } from '../sandbox/registry.js';
import { RunRegistry, newRunId } from '../sandbox/run-registry.js';
import type { SandboxEnvSpec, SandboxProvider } from '../sandbox/types.js';

/** Exit codes of a run stopped by a signal: 128 + the signal's number, as shells report them. */
export const SIGNAL_EXIT_CODES = { SIGINT: 130, SIGTERM: 143 } as const;
export type StopSignal = keyof typeof SIGNAL_EXIT_CODES;

/** How long a forced stop waits for its hooks and sandbox teardown before exiting (15 s). */
const FORCED_STOP_MS = 15_000;
/** How long a forced stop waits for the provider to close (SSH, EC2) after that (2 s). */
const FORCED_CLOSE_MS = 2_000;

export interface RunSessionOptions {
  config: Config;
  /**
   * The `--sandbox` value (docker, local, ssh://user@host[:port], ec2). Absent for a process that
   * runs no samples itself (a fleet controller): then there is no provider and no sweep.
   */
  sandbox?: string;
  /** Where a `module:export` sandbox is looked up (the working directory, then `--extra-src` trees). */
  importRoots?: string[];
  /** One-off console lines (stop messages, sandbox notices, leftovers swept). */
  note: (text: string) => void;
  /** What the first SIGINT/SIGTERM does (default 'cancel'): stop running samples, or let them finish ('drain'). */
  firstSignal?: 'cancel' | 'drain';
  /** Listen for SIGINT and SIGTERM (default true). */
  handleSignals?: boolean;
  /** Ends the process on a forced stop (default `process.exit`). */
  exit?: (code: number) => void;
  /**
   * Hold the sandbox provider open across several runs of this session (default false): each
   * run's taskCleanup is deferred to close(), so one EC2 instance serves them all.
   */
  holdSandbox?: boolean;
}

export type RunSessionState = 'open' | 'draining' | 'stopping' | 'forced' | 'closed';

export class RunSession {
  readonly runId: string;
  readonly registry: RunRegistry;
  private readonly sandboxProvider?: SandboxProvider;
  private readonly stopTaking = new AbortController();
  private readonly cancel = new AbortController();
  private state: RunSessionState = 'open';
  private stopSignal?: StopSignal;
  private readonly forcedStopHooks = new Set<() => Promise<void>>();
  private readonly environments = new Map<string, Promise<void>>();
  private readonly onSigint = () => this.onSignal('SIGINT');
  private readonly onSigterm = () => this.onSignal('SIGTERM');

  private constructor(
    private readonly options: RunSessionOptions,
    runId: string,
    registry: RunRegistry,
    provider: SandboxProvider | undefined,
  ) {
    this.runId = runId;
    this.registry = registry;
    this.sandboxProvider = provider;
    // Every sample in flight listens on these (and removes its listener when done): with more
    // than 10 at once Node would warn of a leak that is not one.
    setMaxListeners(0, this.stopTaking.signal, this.cancel.signal);
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
    const created = options.sandbox ? await createProvider(options.sandbox, { config: options.config, runId, registry, onNotice, ...(options.importRoots ? { importRoots: options.importRoots } : {}) }) : undefined;
    const provider = created && options.holdSandbox ? new HeldProvider(created) : created;
    await provider?.preflight?.();
    registry.register(runId);
    const session = new RunSession(options, runId, registry, provider);
    if (options.handleSignals ?? true) {
      process.on('SIGINT', session.onSigint);
      process.on('SIGTERM', session.onSigterm);
    }
    if (provider) {
      const swept = await provider.sweep().catch(() => ({ removed: [] as string[] }));
      if (swept.removed.length) options.note(`removed ${swept.removed.length} leftover sandbox(es) of runs that were killed`);
    }
    return session;
  }

  /** The sandbox provider; a session opened without `sandbox` has none and says so. */
  get provider(): SandboxProvider {
    if (!this.sandboxProvider) throw new Error('this run session was opened without a sandbox');
    return this.sandboxProvider;
  }

  /** Aborted when running samples must stop: the first signal (default), stop(), or a forced stop. */
  get signal(): AbortSignal {
    return this.cancel.signal;
  }

  /** Aborted when no new work may start: the first signal, drain() or stop(). */
  get stopping(): AbortSignal {
    return this.stopTaking.signal;
  }

  /** The signal that stopped the run, if one did. */
  get stoppedBy(): StopSignal | undefined {
    return this.stopSignal;
  }

  /** The process exit code for a run that was stopped (130 for SIGINT or stop(), 143 for SIGTERM). */
  get stoppedExitCode(): number {
    return SIGNAL_EXIT_CODES[this.stopSignal ?? 'SIGINT'];
  }

  /** Takes no new work; running samples finish. */
  drain(): void {
    if (this.state !== 'open') return;
    this.state = 'draining';
    this.stopTaking.abort();
  }

  /** Takes no new work and stops running samples, as the first Ctrl-C does. */
  stop(): void {
    if (this.state !== 'open' && this.state !== 'draining') return;
    this.state = 'stopping';
    this.stopTaking.abort();
    this.cancel.abort();
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
      await this.teardown().catch(() => {});
      await this.sandboxProvider?.close?.().catch(() => {});
      this.registry.unregister(this.runId);
    } finally {
      this.removeSignalHandlers();
    }
  }

  /** The provider's run-wide teardown (a held provider's deferred one included). */
  private async teardown(): Promise<void> {
    const p = this.sandboxProvider;
    if (p instanceof HeldProvider) await p.release();
    else await p?.taskCleanup();
  }

  private removeSignalHandlers(): void {
    process.off('SIGINT', this.onSigint);
    process.off('SIGTERM', this.onSigterm);
  }

  private onSignal(signal: StopSignal): void {
    if (this.state === 'open') {
      this.stopSignal = signal;
      if (this.options.firstSignal === 'drain') {
        this.options.note('Stopping: no new work; running samples finish (press Ctrl-C again to force)...');
        this.drain();
      } else {
        this.options.note('Stopping: no new samples; tearing down running sandboxes (press Ctrl-C again to force)...');
        this.stop();
      }
      return;
    }
    if (this.state === 'draining' || this.state === 'stopping') this.forceStop();
  }

  private forceStop(): void {
    this.state = 'forced';
    this.options.note('Forced stop: removing sandboxes and exiting.');
    // Marked before teardown: whatever teardown does not reach (a project still being created,
    // the time running out) is the next run's or `ct sandbox cleanup`'s to sweep.
    try {
      this.registry.abandon(this.runId);
    } catch (e) {
      this.options.note(`could not mark the run as stopped: ${errorMessage(e)}`);
    }
    this.stopTaking.abort();
    this.cancel.abort();
    const hooks = [...this.forcedStopHooks].map((h) => h());
    const work = Promise.allSettled([...hooks, this.teardown()]);
    void within(work, FORCED_STOP_MS)
      .then(() => within(this.sandboxProvider?.close?.(), FORCED_CLOSE_MS))
      .finally(() => {
        this.removeSignalHandlers();
        (this.options.exit ?? process.exit)(this.stoppedExitCode);
      });
  }
}

/** Waits for `p` (its failure ignored) at most `ms`. */
async function within(p: Promise<unknown> | undefined, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.resolve(p).catch(() => {}), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

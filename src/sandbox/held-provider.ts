import type { SampleInitContext, SampleSandboxes, SandboxEnvSpec, SandboxProvider, SweepReport } from './types.js';

/**
 * A provider held open across several runs of one session: the same provider, except that
 * `taskCleanup` (which each run calls when it ends, and which terminates an EC2 instance) does
 * nothing. Samples still clean up after themselves (sampleCleanup); the run-wide teardown happens
 * once, when the session closes and calls `release`. Used by pipelines that run several evals and
 * smoke tests on one EC2 instance (`ct run mtgen`).
 */
export class HeldProvider implements SandboxProvider {
  readonly name: string;

  constructor(private readonly inner: SandboxProvider) {
    this.name = inner.name;
  }

  taskInit(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void> {
    return this.inner.taskInit(env, signal);
  }

  sampleInit(env: SandboxEnvSpec, ctx: SampleInitContext): Promise<SampleSandboxes> {
    return this.inner.sampleInit(env, ctx);
  }

  sampleCleanup(sandboxes: SampleSandboxes): Promise<void> {
    return this.inner.sampleCleanup(sandboxes);
  }

  /** Deferred to `release`: the provider's run-wide resources outlive this run. */
  async taskCleanup(): Promise<void> {}

  sweep(options?: { all?: boolean }): Promise<SweepReport> {
    return this.inner.sweep(options);
  }

  async preflight(): Promise<void> {
    await this.inner.preflight?.();
  }

  /** The provider's own teardown: what every run left behind, then its machines and connections. */
  async release(): Promise<void> {
    await this.inner.taskCleanup();
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}

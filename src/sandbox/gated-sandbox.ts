import type { ExecOptions, ExecResult, SampleSandboxes, Sandbox } from './types.js';

/**
 * A sandbox whose calls wait until `ready` settles: the agent's view of a sample's sandboxes
 * while ct still looks at them first (the interpreters' fingerprint, scoring/isolated-scorer.ts).
 * Started alongside the policy, that work is hidden behind its first model call; a policy that
 * acts at once waits for it.
 */
export class GatedSandbox implements Sandbox {
  constructor(
    private readonly inner: Sandbox,
    private readonly ready: Promise<unknown>,
  ) {}

  get service(): string {
    return this.inner.service;
  }

  async exec(cmd: string[], options?: ExecOptions): Promise<ExecResult> {
    await this.ready;
    return this.inner.exec(cmd, options);
  }

  async writeFile(path: string, contents: string | Uint8Array): Promise<void> {
    await this.ready;
    return this.inner.writeFile(path, contents);
  }

  readFile(path: string, format?: 'text'): Promise<string>;
  readFile(path: string, format: 'bytes'): Promise<Uint8Array>;
  async readFile(path: string, format: 'text' | 'bytes' = 'text'): Promise<string | Uint8Array> {
    await this.ready;
    return format === 'bytes' ? this.inner.readFile(path, 'bytes') : this.inner.readFile(path, 'text');
  }

  isAlive(): Promise<boolean> {
    return this.inner.isAlive();
  }

  describe(): string {
    return this.inner.describe();
  }
}

/** Every sandbox of a sample behind the same gate (`ready` never rejects the callers). */
export function gateSandboxes(sandboxes: SampleSandboxes, ready: Promise<unknown>): SampleSandboxes {
  const settled = ready.then(
    () => undefined,
    () => undefined,
  );
  return new Map([...sandboxes].map(([name, s]) => [name, new GatedSandbox(s, settled)]));
}

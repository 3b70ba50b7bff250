import type { ExecResult, Sandbox } from '../../../src/sandbox/types.js';

/**
 * A sandbox that answers every command at once with a fixed output and keeps files in memory:
 * for exercising the agent loop without Docker (and for measuring it). Records the commands run
 * and the time spent inside exec.
 */
export class InstantSandbox implements Sandbox {
  readonly service = 'default';
  readonly commands: string[][] = [];
  execMs = 0;
  private readonly files = new Map<string, string>();

  constructor(private readonly output = 'ok\n') {}

  async exec(cmd: string[]): Promise<ExecResult> {
    const t = performance.now();
    this.commands.push(cmd);
    const stdout = cmd.includes('command -v bash || echo sh') ? '/bin/bash\n' : this.output;
    this.execMs += performance.now() - t;
    return { success: true, returncode: 0, stdout, stderr: '' };
  }
  async writeFile(path: string, contents: string | Uint8Array): Promise<void> {
    this.files.set(path, typeof contents === 'string' ? contents : Buffer.from(contents).toString());
  }
  readFile(path: string, format?: 'text'): Promise<string>;
  readFile(path: string, format: 'bytes'): Promise<Uint8Array>;
  async readFile(path: string, format?: 'text' | 'bytes'): Promise<string | Uint8Array> {
    const text = this.files.get(path) ?? '';
    return format === 'bytes' ? Buffer.from(text) : text;
  }
  async isAlive(): Promise<boolean> {
    return true;
  }
  describe(): string {
    return 'instant';
  }
}

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { CommandRunner, RunOptions, RunResult, RunningProcess } from './command-runner.js';
import { spawnHelper } from './spawn-helper.js';

const DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024;

/** Runs programs on this machine (no shell): short ones through the spawn helper, long-lived ones with child_process.spawn. */
export class LocalRunner implements CommandRunner {
  readonly target = 'local';
  readonly scratchDir: string;

  constructor() {
    this.scratchDir = join(tmpdir(), `ct-${process.pid}`);
    mkdirSync(this.scratchDir, { recursive: true, mode: 0o700 });
  }

  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, data);
  }

  async removeFile(path: string): Promise<void> {
    await rm(path, { force: true });
  }

  /**
   * Runs through the spawn helper (spawn-helper.ts), so the cost of creating the process does not
   * grow with ct's memory over a long run.
   */
  async run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
    const [file, ...args] = argv;
    const r = await spawnHelper.run(file!, args, {
      env: options.env ? { ...process.env, ...options.env } : process.env,
      maxOutput: options.maxOutput ?? DEFAULT_MAX_OUTPUT,
      ...(options.input !== undefined && { input: options.input }),
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      ...(options.signal && { signal: options.signal }),
    });
    return {
      code: r.code,
      stdout: r.stdout,
      stderr: r.stderr,
      timedOut: r.timedOut,
      stdoutTruncated: r.stdoutTruncated,
      stderrTruncated: r.stderrTruncated,
      stdoutDropped: r.stdoutDropped,
      stderrDropped: r.stderrDropped,
    };
  }

  async start(argv: string[], options: { env?: Record<string, string> } = {}): Promise<RunningProcess> {
    const [file, ...args] = argv;
    const child = spawn(file!, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: options.env ? { ...process.env, ...options.env } : process.env,
    });
    const exited = new Promise<number | null>((resolve) => {
      child.on('error', () => resolve(null));
      child.on('close', (code) => resolve(code));
    });
    child.stdin.on('error', () => {});
    return {
      stdin: child.stdin,
      stdout: child.stdout,
      stderr: child.stderr,
      exited,
      kill: () => child.kill('SIGKILL'),
    };
  }
}

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { CommandRunner, RunOptions, RunResult, RunningProcess } from './command-runner.js';
import { TailBuffer } from './tail-buffer.js';

const DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024;

/** Runs programs on this machine with child_process.spawn (no shell). */
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

  run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
    return new Promise((resolve, reject) => {
      const [file, ...args] = argv;
      const child = spawn(file!, args, {
        stdio: ['pipe', 'pipe', 'pipe'],
        env: options.env ? { ...process.env, ...options.env } : process.env,
      });
      const limit = options.maxOutput ?? DEFAULT_MAX_OUTPUT;
      const out = new TailBuffer(limit);
      const err = new TailBuffer(limit);
      let timedOut = false;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => child.kill('SIGKILL');
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          timedOut = true;
          child.kill('SIGKILL');
        }, options.timeoutMs);
      }
      // A listener added to an already aborted signal never fires.
      if (options.signal?.aborted) onAbort();
      else options.signal?.addEventListener('abort', onAbort, { once: true });
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => err.push(c));
      child.stdin.on('error', () => {
        // The program may exit without reading its input (EPIPE); its exit code tells the story.
      });
      child.on('error', (e) => {
        if (timer) clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        reject(e);
      });
      child.on('close', (code) => {
        if (timer) clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        resolve({
          code,
          stdout: out.toBuffer(),
          stderr: err.toBuffer(),
          timedOut,
          stdoutTruncated: out.truncated,
          stderrTruncated: err.truncated,
        });
      });
      if (options.input !== undefined) child.stdin.end(options.input);
      else child.stdin.end();
    });
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

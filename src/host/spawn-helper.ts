/**
 * Runs programs on this machine through one long-lived, small helper process, instead of forking
 * ct's own process for each.
 *
 * Why: forking copies the parent's page tables, so `child_process.spawn` costs more the larger
 * the parent's memory. A CPU profile of a 2,000-sample `--sandbox local` run spent 43% of its time
 * in spawn, growing as the run went on. The helper (spawn-helper-main.ts) is a Node process that
 * holds nothing but the programs it runs; it forks from its own small heap, so process creation
 * costs the same at the 100th sample and at the 100,000th. Requests and results travel as JSON
 * lines over its stdin/stdout (output base64, capped per stream as `maxOutput` says).
 *
 * The helper starts on first use and is restarted if it dies (its running programs then fail
 * with an error saying so). It does not keep ct alive: its pipes are unreferenced while idle.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface SpawnRequest {
  id: number;
  file: string;
  args: string[];
  cwd?: string;
  /** The program's whole environment. */
  env: Record<string, string | undefined>;
  /** In its own process group, killed as a group on timeout or abort. */
  detached?: boolean;
  uid?: number;
  gid?: number;
  /** Base64. */
  input?: string;
  timeoutMs?: number;
  /** Per-stream cap in bytes; the tail is kept. */
  maxOutput: number;
}

export interface SpawnResponse {
  id: number;
  code: number | null;
  signal: string | null;
  /** Base64. */
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** Bytes dropped from the front of each stream to keep its tail within `maxOutput`. */
  stdoutDropped?: number;
  stderrDropped?: number;
  timedOut: boolean;
  /** The program could not be started (e.g. ENOENT), or failed to. */
  error?: { code?: string; message: string };
}

export interface SpawnOptions {
  cwd?: string;
  env: Record<string, string | undefined>;
  detached?: boolean;
  uid?: number;
  gid?: number;
  input?: string | Uint8Array;
  timeoutMs?: number;
  maxOutput: number;
  signal?: AbortSignal;
}

export interface SpawnResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  stdoutDropped: number;
  stderrDropped: number;
  timedOut: boolean;
}

/** An error starting the program, with its errno code (ENOENT, EACCES, ...). */
export class SpawnError extends Error {
  override readonly name = 'SpawnError';
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

const MAIN = fileURLToPath(new URL('./spawn-helper-main.js', import.meta.url));

export class SpawnHelper {
  private child: ChildProcessWithoutNullStreams | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: SpawnResult) => void; reject: (e: Error) => void }>();

  /** Runs `file args` to its end through the helper. */
  run(file: string, args: string[], options: SpawnOptions): Promise<SpawnResult> {
    const child = this.ensure();
    const id = this.nextId++;
    const request: SpawnRequest = {
      id,
      file,
      args,
      env: options.env,
      maxOutput: options.maxOutput,
      ...(options.cwd !== undefined && { cwd: options.cwd }),
      ...(options.detached && { detached: true }),
      ...(options.uid !== undefined && { uid: options.uid }),
      ...(options.gid !== undefined && { gid: options.gid }),
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      ...(options.input !== undefined && { input: Buffer.from(options.input).toString('base64') }),
    };
    return new Promise<SpawnResult>((resolve, reject) => {
      const onAbort = () => this.child?.stdin.write(`${JSON.stringify({ kill: id })}\n`);
      options.signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => options.signal?.removeEventListener('abort', onAbort);
      this.pending.set(id, {
        resolve: (r) => {
          done();
          resolve(r);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      this.reference(true);
      child.stdin.write(`${JSON.stringify(request)}\n`);
      if (options.signal?.aborted) onAbort();
    });
  }

  private ensure(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    const child = spawn(process.execPath, [MAIN], { stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
    this.child = child;
    child.stdin.on('error', () => undefined);
    child.stderr.on('data', () => undefined);
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => this.receive(line));
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      const error = new Error(`the spawn helper exited (${signal ?? `code ${code}`}) while running a program`);
      for (const p of this.pending.values()) p.reject(error);
      this.pending.clear();
    });
    child.unref();
    this.reference(false);
    return child;
  }

  private receive(line: string): void {
    if (!line) return;
    const r = JSON.parse(line) as SpawnResponse;
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (this.pending.size === 0) this.reference(false);
    if (r.error && r.code === null && r.signal === null) {
      p.reject(new SpawnError(r.error.message, r.error.code));
      return;
    }
    p.resolve({
      code: r.code,
      signal: r.signal,
      stdout: Buffer.from(r.stdout, 'base64'),
      stderr: Buffer.from(r.stderr, 'base64'),
      stdoutTruncated: r.stdoutTruncated,
      stderrTruncated: r.stderrTruncated,
      stdoutDropped: r.stdoutDropped ?? 0,
      stderrDropped: r.stderrDropped ?? 0,
      timedOut: r.timedOut,
    });
  }

  /** Keeps ct's event loop alive while a program runs, and not while the helper is idle. */
  private reference(on: boolean): void {
    const child = this.child;
    if (!child) return;
    for (const stream of [child.stdout, child.stderr, child.stdin] as Array<{ ref?: () => void; unref?: () => void }>) {
      if (on) stream.ref?.();
      else stream.unref?.();
    }
  }
}

/** The process-wide helper. */
export const spawnHelper = new SpawnHelper();

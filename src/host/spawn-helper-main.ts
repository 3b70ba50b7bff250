/**
 * The spawn helper's process (see spawn-helper.ts): reads one JSON request per line on stdin,
 * runs each program, and writes one JSON response per line on stdout when it ends. Its heap stays
 * small whatever the parent holds, so each fork it makes costs the same at any point of a run.
 * It exits when its stdin closes (the parent is gone).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { TailBuffer } from './tail-buffer.js';
import type { SpawnRequest, SpawnResponse } from './spawn-helper.js';

const running = new Map<number, () => void>();

function reply(response: SpawnResponse): void {
  process.stdout.write(`${JSON.stringify(response)}\n`);
}

function start(req: SpawnRequest): void {
  let child;
  try {
    child = spawn(req.file, req.args, {
      cwd: req.cwd,
      env: req.env,
      detached: req.detached,
      uid: req.uid,
      gid: req.gid,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  } catch (e) {
    reply({ id: req.id, code: null, signal: null, stdout: '', stderr: '', stdoutTruncated: false, stderrTruncated: false, timedOut: false, error: errorOf(e) });
    return;
  }
  const out = new TailBuffer(req.maxOutput);
  const err = new TailBuffer(req.maxOutput);
  let timedOut = false;
  let failed: SpawnResponse['error'];
  const kill = () => {
    try {
      if (req.detached && child.pid) process.kill(-child.pid, 'SIGKILL');
      else child.kill('SIGKILL');
    } catch {
      child.kill('SIGKILL');
    }
  };
  running.set(req.id, kill);
  const timer =
    req.timeoutMs !== undefined
      ? setTimeout(() => {
          timedOut = true;
          kill();
        }, req.timeoutMs)
      : undefined;
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stderr.on('data', (c: Buffer) => err.push(c));
  child.stdin.on('error', () => {
    // The program may exit without reading its input (EPIPE); its exit code tells the story.
  });
  const finish = (code: number | null, signal: NodeJS.Signals | null) => {
    if (!running.delete(req.id)) return;
    if (timer) clearTimeout(timer);
    reply({
      id: req.id,
      code,
      signal,
      stdout: out.toBuffer().toString('base64'),
      stderr: err.toBuffer().toString('base64'),
      stdoutTruncated: out.truncated,
      stderrTruncated: err.truncated,
      stdoutDropped: out.dropped,
      stderrDropped: err.dropped,
      timedOut,
      ...(failed && { error: failed }),
    });
  };
  child.on('error', (e) => {
    failed = errorOf(e);
    // A program that never started emits no close.
    if (child.pid === undefined) finish(null, null);
  });
  child.on('close', finish);
  if (req.input !== undefined) child.stdin.end(Buffer.from(req.input, 'base64'));
  else child.stdin.end();
}

function errorOf(e: unknown): { code?: string; message: string } {
  const err = e as NodeJS.ErrnoException;
  return { ...(err.code && { code: err.code }), message: err.message ?? String(e) };
}

// Ctrl-C reaches the whole foreground process group: ct decides what stops, and this helper's
// end comes with its stdin closing.
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => undefined);

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  if (!line) return;
  const msg = JSON.parse(line) as SpawnRequest | { kill: number };
  if ('kill' in msg) running.get(msg.kill)?.();
  else start(msg);
});
lines.on('close', () => process.exit(0));

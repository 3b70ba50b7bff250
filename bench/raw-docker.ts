/**
 * The floor: the same calls as plain docker CLI commands from this process, against a
 * container started with `docker run` (one service) or a project started with
 * `docker compose up --wait` (several services). No orchestrator, no log.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { BenchCall } from './trajectory.js';
import type { BenchEnv } from './workspace.js';

export interface RawSample {
  initMs: number;
  cleanupMs: number;
  callMs: number[];
  /** From the first start command to the end of cleanup. */
  totalMs: number;
}

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a docker CLI command to the end (output fully read, as an orchestrator would). */
export function docker(args: string[], input?: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.stdin.on('error', () => {});
    child.on('error', reject);
    child.on('close', (code) =>
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
    child.stdin.end(input ?? '');
  });
}

async function ok(args: string[], input?: string): Promise<string> {
  const r = await docker(args, input);
  if (r.code !== 0) throw new Error(`docker ${args.slice(0, 4).join(' ')} failed (${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

const WRITE = 'mkdir -p "$(dirname "$1")" && cat > "$1"';

/** One call as docker CLI arguments (and stdin). */
export function rawCall(container: string, c: BenchCall): { args: string[]; input?: string } {
  switch (c.kind) {
    case 'exec':
    case 'big':
      return { args: ['exec', container, 'bash', '-c', c.cmd!] };
    case 'write':
      return { args: ['exec', '-i', container, 'sh', '-c', WRITE, 'sh', c.path!], input: c.text };
    case 'read':
      return { args: ['exec', container, 'cat', c.path!] };
  }
}

/** Starts the environment, makes the calls one after another, removes it. */
export async function rawSample(env: BenchEnv, calls: BenchCall[]): Promise<RawSample> {
  const t0 = performance.now();
  const project = `ctbench-raw-${randomBytes(4).toString('hex')}`;
  const compose = ['compose', '-p', project, '-f', env.composeFile];
  let container: string;
  if (env.services === 1) {
    container = (await ok(['run', '-d', '--init', '--label', `ctbench=${project}`, 'debian:bookworm-slim', 'sleep', 'infinity'])).trim();
  } else {
    await ok([...compose, 'up', '--detach', '--wait']);
    container = (await ok([...compose, 'ps', '--quiet', 'default'])).trim();
  }
  const initMs = performance.now() - t0;
  const callMs: number[] = [];
  let cleanupMs = 0;
  try {
    for (const c of calls) {
      const { args, input } = rawCall(container, c);
      const t = performance.now();
      await ok(args, input);
      callMs.push(performance.now() - t);
    }
  } finally {
    const t = performance.now();
    if (env.services === 1) await ok(['rm', '--force', container]);
    else await ok([...compose, 'down', '--volumes']);
    cleanupMs = performance.now() - t;
  }
  return { initMs, cleanupMs, callMs, totalMs: performance.now() - t0 };
}

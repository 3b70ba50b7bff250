import { spawn, type ChildProcess } from 'node:child_process';
import { CT_BIN, REPO_ROOT } from './paths.js';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

export interface CtResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export const EXAMPLE_SETTINGS = join(REPO_ROOT, 'examples', 'settings');

/** Environment for a ct child process: example settings, a private state dir, no TTY. */
export function ctEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return { ...process.env, CT_SETTINGS_DIR: EXAMPLE_SETTINGS, NO_COLOR: '1', ...extra };
}

/** Starts `ct ARGS` as a user would (the package's bin). */
export function startCt(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  return spawn(process.execPath, [CT_BIN, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? ctEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs `ct ARGS` to the end. */
export function runCt(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CtResult> {
  return new Promise((resolve, reject) => {
    const child = startCt(args, options);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`ct ${args.join(' ')} did not finish in time\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 180_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Resolves when `predicate(output so far)` holds for the child's stderr+stdout. */
export function waitForOutput(child: ChildProcess, predicate: (text: string) => boolean, timeoutMs = 120_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error(`timed out waiting for output; got:\n${text}`)), timeoutMs);
    const on = (d: Buffer) => {
      text += d.toString();
      if (predicate(text)) {
        clearTimeout(timer);
        resolve(text);
      }
    };
    child.stdout!.on('data', on);
    child.stderr!.on('data', on);
  });
}

/** The one .eval log in `dir`. */
export function onlyLog(dir: string): string {
  const logs = readdirSync(dir).filter((f) => f.endsWith('.eval'));
  if (logs.length !== 1) throw new Error(`expected one .eval in ${dir}, found ${logs.length}: ${logs.join(', ')}`);
  return join(dir, logs[0]!);
}

/** The exit code and all output of a started ct process, once it has closed. */
export function finished(child: ChildProcess): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/**
 * Runs Python scripts against the real `inspect_ai` package (from PyPI). Each call starts one
 * interpreter (about a second), so a test file batches its questions into one call.
 */
import { spawn } from 'node:child_process';
import { parseInspectJson } from '../../src/log/inspect-json.js';

const PYTHON = process.env.PYTHON ?? 'python3';

/** Runs `script` with `input` as JSON on stdin; the script prints one JSON document on stdout. */
export function runPython(script: string, input: unknown, timeoutMs = 120_000): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, ['-c', script], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`${PYTHON} exited with ${code}:\n${stderr}\n${stdout}`));
      try {
        resolve(parseInspectJson(stdout.trim().split('\n').at(-1) ?? ''));
      } catch (err) {
        reject(new Error(`unreadable output from ${PYTHON}: ${(err as Error).message}\n${stdout}\n${stderr}`));
      }
    });
    child.stdin.end(JSON.stringify(input));
  });
}

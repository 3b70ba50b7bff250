import { readFileSync } from 'node:fs';
import { basename, extname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ExecTimeoutError, ScorerError } from '../errors.js';
import type { Sandbox } from '../sandbox/types.js';

/**
 * The check-script scorer protocol. A scorer is a file copied into the sandbox and run there:
 * with the interpreter its shebang names, else by extension (.py python3, .sh sh, .js node).
 * It may print one JSON object line (metadata); its last line is the verdict:
 *   CORRECT: <explanation>      the task was done
 *   INCORRECT: <explanation>    it was not
 *   NOT_READY: <explanation>    the environment was broken; the sample is an error, never scored
 * Anything else (no verdict, a crash, a timeout) is a scorer error: the sample is an error too.
 * CORRECT counts only from a scorer that exits 0: one that says CORRECT and then fails may have
 * crashed before checking everything. INCORRECT with a non-zero exit stays INCORRECT.
 */
export interface CheckResult {
  value: 'C' | 'I';
  explanation: string;
  metadata: Record<string, unknown>;
}

export interface CheckContext {
  /** Extra environment for the script (CT_SUBMISSION, CT_MAIN_TASK, ...). */
  env: Record<string, string>;
  timeoutSeconds: number;
}

const BY_EXTENSION: Record<string, string[]> = {
  '.py': ['python3'],
  '.sh': ['sh'],
  '.bash': ['bash'],
  '.js': ['node'],
};

/** The command that runs `file` once it sits at `remotePath`. */
export function scorerCommand(file: string, contents: string, remotePath: string): string[] {
  const first = contents.split('\n', 1)[0] ?? '';
  if (first.startsWith('#!')) {
    const parts = first.slice(2).trim().split(/\s+/).filter(Boolean);
    if (parts.length > 0) return [...parts, remotePath];
  }
  const interp = BY_EXTENSION[extname(file)];
  if (!interp) throw new ScorerError(`scorer ${file} has no shebang and no known extension (.py, .sh, .bash, .js)`);
  return [...interp, remotePath];
}

export async function runCheckScript(sandbox: Sandbox, file: string, ctx: CheckContext): Promise<CheckResult> {
  const contents = readFileSync(file, 'utf8');
  const dir = `/tmp/ct-scorer-${randomBytes(4).toString('hex')}`;
  const remote = `${dir}/${basename(file)}`;
  await sandbox.writeFile(remote, contents);
  let r;
  try {
    r = await sandbox.exec(scorerCommand(file, contents, remote), {
      env: ctx.env,
      timeout: ctx.timeoutSeconds,
      cwd: '/',
    });
  } catch (e) {
    if (e instanceof ExecTimeoutError) throw new ScorerError(`scorer ${basename(file)} timed out after ${ctx.timeoutSeconds} s`);
    throw e;
  } finally {
    await sandbox.exec(['rm', '-rf', dir]).catch(() => {});
  }
  return parseCheckOutput(r.stdout, r.stderr, r.returncode, basename(file));
}

export function parseCheckOutput(stdout: string, stderr: string, returncode: number, name: string): CheckResult {
  const lines = stdout.split('\n').map((l) => l.trimEnd()).filter((l) => l.trim() !== '');
  const last = lines.at(-1) ?? '';
  let metadata: Record<string, unknown> = {};
  for (const l of lines.slice(0, -1)) {
    const t = l.trim();
    if (t.startsWith('{')) {
      try {
        metadata = { ...metadata, ...(JSON.parse(t) as Record<string, unknown>) };
      } catch {
        // Not metadata, just output that happens to start with a brace.
      }
    }
  }
  const m = /^(CORRECT|INCORRECT|NOT_READY):\s*(.*)$/.exec(last.trim());
  if (!m) {
    const tail = (stderr.trim().split('\n').slice(-5).join('\n') || last).slice(0, 2000);
    throw new ScorerError(`scorer ${name} gave no verdict (exit ${returncode}); its last line must start with CORRECT: or INCORRECT:\n${tail}`);
  }
  if (m[1] === 'NOT_READY') throw new ScorerError(`environment not ready (scorer ${name}): ${m[2]}`);
  if (m[1] === 'CORRECT' && returncode !== 0) {
    const tail = stderr.trim().split('\n').slice(-5).join('\n').slice(0, 2000);
    throw new ScorerError(`scorer ${name} printed CORRECT but exited with code ${returncode}; a passing scorer must exit 0${tail ? `\n${tail}` : ''}`);
  }
  return { value: m[1] === 'CORRECT' ? 'C' : 'I', explanation: m[2] ?? '', metadata };
}

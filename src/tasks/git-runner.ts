import { spawn } from 'node:child_process';
import { GitError } from '../errors.js';
import { redact } from './redact.js';

/** A username and password git is given for URLs under `prefix` (e.g. `https://github.com`). */
export interface GitCredential {
  prefix: string;
  username: string;
  password: string;
}

export interface GitRunnerOptions {
  /** Seconds one git command may run before it is killed. */
  timeoutSeconds: number;
  /** The environment git runs in: the user's, so their git config, SSH agent and helpers apply. */
  env: NodeJS.ProcessEnv;
  credentials?: GitCredential[];
  /** Values to hide in every message besides the credentials' (e.g. a token offered to no host). */
  secrets?: string[];
}

export interface GitResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

// stderr phrases of failures that may pass on a second try (network trouble, a busy server).
const TRANSIENT = /could not resolve host|connection (timed out|refused|reset)|unable to access|early eof|rpc failed|operation timed out|remote end hung up|temporary failure/i;

/**
 * Runs the `git` program (spawned without a shell) with a timeout on every call. Credentials
 * reach git only through its environment: each one becomes a `credential.<prefix>.helper`
 * shell snippet set with GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n that echoes environment variables,
 * so no secret is on a command line, in .git/config or in a message (every message is redacted).
 */
export class GitRunner {
  private readonly env: NodeJS.ProcessEnv;
  private readonly secrets: string[];

  constructor(private readonly options: GitRunnerOptions) {
    const creds = options.credentials ?? [];
    for (const c of creds) {
      if (/[\r\n\0]/.test(c.username + c.password)) throw new GitError('a git credential contains a line break', false);
    }
    // A long username is likely a token used as one (`https://TOKEN@host/...`).
    this.secrets = [...(options.secrets ?? []), ...creds.flatMap((c) => [c.password, c.username.length >= 20 ? c.username : ''])].filter(Boolean);
    // LC_ALL=C keeps git's messages in English; GIT_TERMINAL_PROMPT=0 makes a missing
    // credential an error instead of a prompt nobody will answer.
    const env: NodeJS.ProcessEnv = { ...options.env, GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C' };
    let n = Number.parseInt(options.env.GIT_CONFIG_COUNT ?? '0', 10) || 0;
    creds.forEach((c, i) => {
      env[`CT_GIT_USERNAME_${i}`] = c.username;
      env[`CT_GIT_PASSWORD_${i}`] = c.password;
      env[`GIT_CONFIG_KEY_${n}`] = `credential.${c.prefix}.helper`;
      env[`GIT_CONFIG_VALUE_${n}`] =
        `!f() { test "$1" = get || exit 0; echo "username=$CT_GIT_USERNAME_${i}"; echo "password=$CT_GIT_PASSWORD_${i}"; }; f`;
      n++;
    });
    if (n > 0) env.GIT_CONFIG_COUNT = String(n);
    this.env = env;
  }

  /** A runner that also offers these credentials (e.g. ones taken out of a repository URL). */
  with(credentials: GitCredential[]): GitRunner {
    if (credentials.length === 0) return this;
    return new GitRunner({ ...this.options, credentials: [...(this.options.credentials ?? []), ...credentials] });
  }

  /** Text with every URL userinfo and every known secret replaced by `***`. */
  redact(text: string): string {
    return redact(text, this.secrets);
  }

  /** Runs `git ARGS` in cwd; a non-zero exit is a GitError unless allowFailure. */
  async run(args: string[], o: { cwd?: string; allowFailure?: boolean } = {}): Promise<GitResult> {
    const timeoutMs = this.options.timeoutSeconds * 1000;
    const what = `git ${args.find((a) => !a.startsWith('-')) ?? ''}`.trim();
    const r = await new Promise<GitResult & { timedOut: boolean }>((resolve, reject) => {
      // git runs helpers (git-remote-https, ssh) as child processes that hold its pipes open;
      // its own process group lets a timeout or an interrupt end all of them at once.
      const child = spawn('git', args, { cwd: o.cwd, env: this.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup(child.pid);
      }, timeoutMs);
      if (child.pid !== undefined) trackGroup(child.pid);
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => err.push(c));
      child.on('error', (e) => {
        clearTimeout(timer);
        untrackGroup(child.pid);
        reject(new GitError(`cannot run git (is it installed?): ${this.redact(e.message)}`, false));
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        untrackGroup(child.pid);
        resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), timedOut });
      });
    });
    if (r.timedOut) throw new GitError(`${what} timed out after ${this.options.timeoutSeconds}s (git.timeout)`, true);
    if (r.code !== 0 && !o.allowFailure) {
      const detail = this.redact(r.stderr.trim().split('\n').slice(-6).join('\n')) || `exit code ${r.code}`;
      throw new GitError(`${what} failed: ${detail}`, TRANSIENT.test(r.stderr));
    }
    return { code: r.code, stdout: r.stdout, stderr: this.redact(r.stderr) };
  }
}

// Process groups of the git commands running now. git runs in its own group (so a timeout can
// end its helpers too), which also keeps a terminal's Ctrl-C from reaching it: ct forwards
// SIGINT/SIGTERM to these groups, then dies of the same signal.
const groups = new Set<number>();

function onSignal(signal: NodeJS.Signals): void {
  for (const pid of groups) killGroup(pid);
  groups.clear();
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  process.kill(process.pid, signal);
}

function trackGroup(pid: number): void {
  if (groups.size === 0) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
  groups.add(pid);
}

function untrackGroup(pid: number | undefined): void {
  if (pid === undefined || !groups.delete(pid) || groups.size > 0) return;
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // The group is already gone.
  }
}

import { execFileSync } from 'node:child_process';
import { mkdtemp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import {
  ConfigError,
  ExecTimeoutError,
  OutputLimitExceededError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
} from '../../errors.js';
import { spawnHelper } from '../../host/spawn-helper.js';
import { argvTooLong } from '../argv-limit.js';
import { withSizes } from '../exec-result.js';
import {
  EXEC_OUTPUT_LIMIT,
  READ_FILE_LIMIT,
  type ExecOptions,
  type ExecResult,
  type SampleInitContext,
  type SampleSandboxes,
  type Sandbox,
  type SandboxEnvSpec,
  type SandboxProvider,
  type SweepReport,
} from '../types.js';

/**
 * The one policy that is this machine's own code with no input from elsewhere: `test` (built
 * into ct, fixed actions). Every other agent chooses commands from something else: a model
 * (honest, attack, obvious-attack, or any agent under a protocol, where defer-to-trusted runs the
 * trusted model's actions), a trajectory file (`replay`: whoever wrote the file chooses what
 * runs), or code from outside ct (a `module:export` policy).
 */
const OWN_CODE_POLICY = 'test';

/** The agent of a run, as the local-sandbox check needs it. */
export interface LocalSandboxAgent {
  /** The policy's name (`--policy`, or `--untrusted-policy` under a protocol). */
  policy: string;
  args?: Record<string, string>;
  /** Whether a `--protocol` wraps the policy. */
  protocol?: boolean;
}

/**
 * Decides whether a run may use `--sandbox local`, whose commands run on this machine with no
 * isolation, as the invoking user. Returns the warning every such run prints (undefined for
 * other sandboxes). Without `unsafeLocal` (`--unsafe-local`) only the built-in `test` policy
 * runs; anything else is a ConfigError (exit 2) saying why and what to add.
 */
export function checkLocalSandbox(sandbox: string, agent: LocalSandboxAgent, unsafeLocal: boolean): string | undefined {
  if (sandbox !== 'local') {
    if (unsafeLocal) throw new ConfigError('--unsafe-local only applies to --sandbox local');
    return undefined;
  }
  const who = `${userInfo().username} (uid ${process.getuid?.() ?? '?'})`;
  if (!unsafeLocal && (agent.policy !== OWN_CODE_POLICY || agent.protocol)) {
    throw new ConfigError(
      `--sandbox local runs the agent's commands directly on this machine as ${who}, with no isolation, ` +
        `and ${whoChooses(agent)}. Use --sandbox docker (the default), ` +
        'or add --unsafe-local if you accept that the agent can read and change anything you can.',
    );
  }
  return (
    `--sandbox local is not isolated: the agent's commands run directly on this machine as ${who} ` +
    'and can read and change anything that user can.'
  );
}

/** Who chooses the commands of an agent other than `test`, for the refusal. */
function whoChooses(agent: LocalSandboxAgent): string {
  if (agent.protocol) return `under --protocol a model's actions run (the untrusted policy's, or the trusted model's when it defers)`;
  if (agent.policy === 'replay') {
    const file = agent.args?.trajectory;
    return `policy replay runs the commands recorded in ${file ? `the trajectory file ${file}` : 'a trajectory file'}, not code of this machine: whoever wrote the file chooses what runs here`;
  }
  if (agent.policy.includes(':')) return `policy ${agent.policy} is code from outside ct (module:export) that chooses the commands`;
  return `policy ${agent.policy} lets a model write those commands`;
}

/**
 * A temporary directory on this machine per sample, no isolation at all: commands run as the
 * invoking user with the host's files, network and processes in reach. For tests and trusted
 * tasks only (see checkLocalSandbox). Relative paths resolve inside the directory; commands run
 * with it as cwd.
 */
export class LocalProvider implements SandboxProvider {
  readonly name = 'local';
  private readonly dirs = new Set<string>();

  async taskInit(): Promise<void> {}

  async sampleInit(_env: SandboxEnvSpec, ctx: SampleInitContext): Promise<SampleSandboxes> {
    const dir = await mkdtemp(join(tmpdir(), `ct-local-${ctx.label.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 24)}-`));
    this.dirs.add(dir);
    return new Map([['default', new LocalSandbox(dir)]]);
  }

  async sampleCleanup(sandboxes: SampleSandboxes): Promise<void> {
    for (const s of sandboxes.values()) {
      if (s instanceof LocalSandbox) {
        await rm(s.dir, { recursive: true, force: true });
        this.dirs.delete(s.dir);
      }
    }
  }

  async taskCleanup(): Promise<void> {
    await Promise.all([...this.dirs].map((d) => rm(d, { recursive: true, force: true })));
    this.dirs.clear();
  }

  async sweep(): Promise<SweepReport> {
    return { removed: [], kept: [] };
  }
}

export class LocalSandbox implements Sandbox {
  readonly service = 'default';
  constructor(readonly dir: string) {}

  describe(): string {
    return `local:${this.dir}`;
  }

  private path(p: string): string {
    return isAbsolute(p) ? p : resolve(this.dir, p);
  }

  async exec(cmd: string[], options: ExecOptions = {}): Promise<ExecResult> {
    const tooLong = argvTooLong(cmd);
    if (tooLong) return { success: false, returncode: 126, stdout: '', stderr: tooLong };
    const ids = options.user ? userIds(options.user) : undefined;
    // Through the spawn helper: forking ct's own (large) process per command costs more as it grows.
    let r;
    try {
      r = await spawnHelper.run(cmd[0]!, cmd.slice(1), {
        cwd: options.cwd ? this.path(options.cwd) : this.dir,
        env: { ...process.env, ...options.env },
        detached: true,
        ...(ids && { uid: ids.uid, gid: ids.gid }),
        ...(options.input !== undefined && { input: options.input }),
        ...(options.timeout !== undefined && { timeoutMs: options.timeout * 1000 }),
        maxOutput: EXEC_OUTPUT_LIMIT,
      });
    } catch (e) {
      // Like a shell: a missing program is exit code 127, not an exception.
      const code = (e as { code?: string }).code;
      if (code === 'ENOENT' || code === 'EACCES') {
        return { success: false, returncode: code === 'ENOENT' ? 127 : 126, stdout: '', stderr: (e as Error).message };
      }
      throw e;
    }
    const stdout = r.stdout.toString('utf8');
    const stderr = r.stderr.toString('utf8');
    if (r.timedOut) throw new ExecTimeoutError(`Command timed out after ${options.timeout} s: ${cmd.join(' ').slice(0, 200)}`, stdout, stderr);
    const returncode = r.code ?? 128 + (r.signal ? 9 : 0);
    return withSizes({ success: returncode === 0, returncode, stdout, stderr }, r.stdoutDropped, r.stderrDropped, r.stdout.length, r.stderr.length);
  }

  async writeFile(path: string, contents: string | Uint8Array): Promise<void> {
    const p = this.path(path);
    try {
      await mkdir(dirname(p), { recursive: true });
      await writeFile(p, contents);
    } catch (e) {
      throw fileError(e, path);
    }
  }

  readFile(path: string, format?: 'text'): Promise<string>;
  readFile(path: string, format: 'bytes'): Promise<Uint8Array>;
  async readFile(path: string, format: 'text' | 'bytes' = 'text'): Promise<string | Uint8Array> {
    const p = this.path(path);
    try {
      const st = await stat(p);
      if (st.isDirectory()) throw Object.assign(new Error(), { code: 'EISDIR' });
      if (st.size > READ_FILE_LIMIT) throw new OutputLimitExceededError(`${path} is larger than the read limit`);
      const buf = await readFile(p);
      return format === 'bytes' ? new Uint8Array(buf) : buf.toString('utf8');
    } catch (e) {
      throw fileError(e, path);
    }
  }

  async isAlive(): Promise<boolean> {
    return stat(this.dir).then(
      (s) => s.isDirectory(),
      () => false,
    );
  }
}

function fileError(e: unknown, path: string): Error {
  switch ((e as NodeJS.ErrnoException).code) {
    case 'ENOENT':
      return new SandboxFileNotFoundError(`File not found: ${path}`);
    case 'EISDIR':
      return new SandboxIsADirectoryError(`Is a directory: ${path}`);
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
    case 'EIO':
      return new SandboxPermissionError(`Permission denied: ${path}`);
    default:
      return e as Error;
  }
}

function userIds(user: string): { uid: number; gid: number } {
  try {
    const uid = Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new SandboxPermissionError(`no such user on this machine: ${user}`);
  }
}

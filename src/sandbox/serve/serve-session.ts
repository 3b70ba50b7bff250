/**
 * `ct sandbox serve`: ct's docker provider for another program, over one pair of pipes. Inspect
 * AI's `ct` sandbox plugin (integrations/inspect/) starts one per Inspect process and maps each
 * SandboxEnvironment method onto a request here.
 *
 * Protocol (frames: see frames.ts; version SERVE_PROTOCOL):
 *   request   {id, op, ...arguments} + body       id > 0, unique among requests in flight
 *   response  {id, ok: true, ...result} + body    or {id, ok: false, error: {type, message}}
 *   notice    {id: 0, notice}                     unsolicited, for the caller's log
 *   cancel    {id, op: 'cancel', target}          no response; the target's exec is killed in
 *                                                 the sandbox and its response never sent
 * The first request must be `hello` {protocol}; a caller speaking another version is refused.
 *
 * Ops: hello, task_init {config, cwd}, sample_init {config, cwd, task, label, env} -> {sample, services[]},
 * exec {handle, cmd, cwd, env, user, timeout, max_output, input} (body: stdin) ->
 * {returncode, stdout_bytes} (body: stdout then stderr), read_file {handle, path, limit}
 * (body: contents), write_file {handle, path} (body: contents), sample_cleanup {sample},
 * task_cleanup {task, cleanup}, cleanup {project, all} (a sweep, or one project) -> {removed, kept}.
 *
 * Error types: timeout (with the partial output as body and stdout_bytes), not_found,
 * permission, is_directory, output_limit, unavailable, config, protocol, error.
 *
 * Lifecycle: the session registers its run (run-registry.ts) when it starts; when its input ends
 * (the caller exited, however) it removes every sandbox it still holds, unless the caller's
 * task_cleanup asked to keep them, and the run's record goes. Killed outright, its run's record
 * names a dead pid: `ct sandbox cleanup` and the `cleanup` op remove what it left.
 */
import { posix } from 'node:path';
import { join } from 'node:path';
import {
  ConfigError,
  ExecTimeoutError,
  OutputLimitExceededError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
  SandboxUnavailableError,
} from '../../errors.js';
import { DockerProvider } from '../docker/docker-provider.js';
import type { ContainerSandbox } from '../docker/container-sandbox.js';
import { PROJECT_PREFIX } from '../run-registry.js';
import type { SampleSandboxes, SandboxEnvSpec, SandboxProvider } from '../types.js';
import { encodeFrame, FrameReader, type Frame } from './frames.js';
import { composeFileFor } from './inspect-config.js';

/** The protocol version; a caller must say the same in its hello. */
export const SERVE_PROTOCOL = 1;

export interface ServeSessionOptions {
  provider: SandboxProvider;
  ctVersion: string;
  /** Where generated compose files go. */
  stateDir: string;
  /** Relative sandbox configs resolve against it. */
  cwd: string;
  write: (frame: Buffer) => void;
}

type Handle = { sandbox: ContainerSandbox; sample: number };
type Args = Record<string, unknown>;

class ProtocolError extends Error {}

export class ServeSession {
  private readonly reader = new FrameReader();
  private readonly handles = new Map<string, Handle>();
  private readonly samples = new Map<number, { sandboxes: SampleSandboxes; task: string }>();
  private readonly inFlight = new Map<number, AbortController>();
  private greeted = false;
  private keepAtExit = false;
  private nextSample = 1;
  private nextHandle = 1;

  constructor(private readonly options: ServeSessionOptions) {}

  /** Feeds bytes from the caller. A stream out of step ends the session (throws). */
  receive(chunk: Buffer): void {
    for (const frame of this.reader.push(chunk)) this.dispatch(frame);
  }

  /** Said to the caller's log. */
  notice(message: string): void {
    this.options.write(encodeFrame({ id: 0, notice: message }));
  }

  /** Whether the caller asked to keep its sandboxes past this session (task_cleanup without cleanup). */
  get keepsSandboxes(): boolean {
    return this.keepAtExit;
  }

  /** The caller is gone: removes the sandboxes still held (unless kept). */
  async end(): Promise<void> {
    for (const c of this.inFlight.values()) c.abort();
    if (this.keepAtExit) return;
    await this.options.provider.taskCleanup().catch(() => {});
  }

  private dispatch(frame: Frame): void {
    const { header, body } = frame;
    const id = header.id;
    if (typeof id !== 'number' || id <= 0) throw new ProtocolError('a request needs a positive numeric id');
    const op = header.op;
    if (op === 'cancel') {
      this.inFlight.get(header.target as number)?.abort();
      return;
    }
    if (!this.greeted && op !== 'hello') return this.reply(id, { ok: false, error: { type: 'protocol', message: 'say hello first' } });
    const control = new AbortController();
    this.inFlight.set(id, control);
    void this.handle(String(op), header, body, control.signal).then(
      ([result, out]) => {
        if (this.inFlight.delete(id) && !control.signal.aborted) this.reply(id, { ok: true, ...result }, out);
      },
      (e: unknown) => {
        if (!this.inFlight.delete(id) || control.signal.aborted) return;
        const [error, out] = describeError(e);
        this.reply(id, { ok: false, error }, out);
      },
    );
  }

  private reply(id: number, header: Args, body?: Buffer): void {
    this.options.write(encodeFrame({ id, ...header }, body));
  }

  private async handle(op: string, a: Args, body: Buffer, signal: AbortSignal): Promise<[Args, Buffer?]> {
    const provider = this.options.provider;
    switch (op) {
      case 'hello':
        if (a.protocol !== SERVE_PROTOCOL) {
          throw new ProtocolError(`protocol ${String(a.protocol)} is not spoken here (ct ${this.options.ctVersion} speaks ${SERVE_PROTOCOL}); install matching versions of ct and inspect-ct`);
        }
        this.greeted = true;
        return [{ protocol: SERVE_PROTOCOL, ct_version: this.options.ctVersion }];
      case 'task_init':
        await provider.taskInit(this.env(a), signal);
        return [{}];
      case 'sample_init': {
        const sandboxes = await provider.sampleInit(this.env(a), {
          label: str(a.label, 'sample'),
          signal,
          env: strings(a.env),
          onNotice: (m) => this.notice(m),
        });
        if (signal.aborted) {
          await provider.sampleCleanup(sandboxes).catch(() => {});
          return [{}];
        }
        const sample = this.nextSample++;
        this.samples.set(sample, { sandboxes, task: str(a.task, '') });
        const services = [...sandboxes.values()].map((s) => {
          const handle = String(this.nextHandle++);
          const sandbox = s as ContainerSandbox;
          this.handles.set(handle, { sandbox, sample });
          return { service: s.service, handle, container: sandbox.info?.name ?? sandbox.containerId, working_dir: sandbox.info?.workingDir ?? '/', user: sandbox.info?.user ?? '' };
        });
        return [{ sample, services }];
      }
      case 'exec':
        return this.exec(a, body, signal);
      case 'read_file': {
        const { sandbox } = this.sandbox(a);
        const limit = typeof a.limit === 'number' ? a.limit : undefined;
        const data = await sandbox.readFile(this.path(sandbox, a.path), 'bytes');
        if (limit !== undefined && data.length > limit) throw new OutputLimitExceededError(`${String(a.path)} is larger than the read limit of ${limit} bytes`);
        return [{}, Buffer.from(data.buffer, data.byteOffset, data.byteLength)];
      }
      case 'write_file': {
        const { sandbox } = this.sandbox(a);
        await sandbox.writeFile(this.path(sandbox, a.path), body);
        return [{}];
      }
      case 'sample_cleanup': {
        const sample = a.sample as number;
        await this.cleanupSample(sample);
        return [{}];
      }
      case 'task_cleanup': {
        // Inspect's --no-sandbox-cleanup: the sandboxes stay, and outlive this process.
        if (a.cleanup === false) {
          this.keepAtExit = true;
          return [{}];
        }
        // Only this task's: other tasks of the same Inspect process may still run.
        const task = str(a.task, '');
        const mine = [...this.samples].filter(([, v]) => v.task === task).map(([k]) => k);
        await Promise.all(mine.map((k) => this.cleanupSample(k).catch(() => {})));
        return [{}];
      }
      case 'cleanup': {
        if (typeof a.project === 'string' && a.project !== '') {
          if (!a.project.startsWith(PROJECT_PREFIX) || !(provider instanceof DockerProvider)) throw new ConfigError(`${a.project} is not a ct sandbox project`);
          await provider.removeProject(a.project);
          return [{ removed: [a.project], kept: [] }];
        }
        const report = await provider.sweep({ all: a.all === true });
        return [{ removed: report.removed, kept: report.kept }];
      }
      default:
        throw new ProtocolError(`unknown op ${op}`);
    }
  }

  private async cleanupSample(sample: number): Promise<void> {
    const entry = this.samples.get(sample);
    if (!entry) return;
    this.samples.delete(sample);
    for (const [h, v] of this.handles) if (v.sample === sample) this.handles.delete(h);
    await this.options.provider.sampleCleanup(entry.sandboxes);
  }

  private async exec(a: Args, body: Buffer, signal: AbortSignal): Promise<[Args, Buffer?]> {
    const { sandbox } = this.sandbox(a);
    const cmd = a.cmd;
    if (!Array.isArray(cmd) || cmd.length === 0 || cmd.some((w) => typeof w !== 'string')) throw new ProtocolError('exec needs cmd: a non-empty list of strings');
    const cwd = typeof a.cwd === 'string' ? this.path(sandbox, a.cwd) : undefined;
    try {
      const r = await sandbox.exec(cmd as string[], {
        input: a.input === true ? body : undefined,
        cwd,
        env: strings(a.env),
        user: this.user(sandbox, a.user),
        timeout: typeof a.timeout === 'number' ? a.timeout : undefined,
        maxOutput: typeof a.max_output === 'number' ? a.max_output : undefined,
        signal,
      });
      const stdout = Buffer.from(r.stdout, 'utf8');
      return [{ returncode: r.returncode, stdout_bytes: stdout.length }, Buffer.concat([stdout, Buffer.from(r.stderr, 'utf8')])];
    } catch (e) {
      if (e instanceof SandboxUnavailableError && signal.aborted) return [{}];
      throw e;
    }
  }

  /**
   * The user to ask the sandbox for: none when `user` is the container's own (Inspect asks for
   * root at each sample's start; in a root container that is the channel already open).
   */
  private user(sandbox: ContainerSandbox, user: unknown): string | undefined {
    if (typeof user !== 'string' || user === '') return undefined;
    const own = sandbox.info?.user ?? '';
    if (user === own || (isRoot(user) && isRoot(own))) return undefined;
    return user;
  }

  /** A relative path or cwd is the container's working directory's, as Inspect's docker sandbox has it. */
  private path(sandbox: ContainerSandbox, p: unknown): string {
    if (typeof p !== 'string' || p === '') throw new ProtocolError('a path is needed');
    return p.startsWith('/') ? p : posix.join(sandbox.info?.workingDir ?? '/', p);
  }

  private sandbox(a: Args): Handle {
    const h = this.handles.get(String(a.handle));
    if (!h) throw new SandboxUnavailableError(`no sandbox ${String(a.handle)} (its sample was cleaned up)`);
    return h;
  }

  private env(a: Args): SandboxEnvSpec {
    const config = typeof a.config === 'string' ? a.config : undefined;
    const cwd = typeof a.cwd === 'string' && a.cwd.startsWith('/') ? a.cwd : this.options.cwd;
    const composeFile = composeFileFor(config, cwd, join(this.options.stateDir, 'inspect'));
    return { name: config ?? 'default', composeFile };
  }
}

function isRoot(user: string): boolean {
  const name = user.split(':')[0]!;
  return name === '' || name === 'root' || name === '0';
}

function str(v: unknown, fallback: string): string {
  return typeof v === 'string' && v !== '' ? v : fallback;
}

function strings(v: unknown): Record<string, string> | undefined {
  if (!v || typeof v !== 'object') return undefined;
  return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, String(x)]));
}

/** The error as the caller's type, and the partial output of a timeout. */
function describeError(e: unknown): [Args, Buffer?] {
  const message = e instanceof Error ? e.message : String(e);
  if (e instanceof ExecTimeoutError) {
    const stdout = Buffer.from(e.stdout, 'utf8');
    return [{ type: 'timeout', message, stdout_bytes: stdout.length }, Buffer.concat([stdout, Buffer.from(e.stderr, 'utf8')])];
  }
  const type =
    e instanceof SandboxFileNotFoundError
      ? 'not_found'
      : e instanceof SandboxPermissionError
        ? 'permission'
        : e instanceof SandboxIsADirectoryError
          ? 'is_directory'
          : e instanceof OutputLimitExceededError
            ? 'output_limit'
            : e instanceof SandboxUnavailableError
              ? 'unavailable'
              : e instanceof ConfigError
                ? 'config'
                : e instanceof ProtocolError
                  ? 'protocol'
                  : 'error';
  return [{ type, message }];
}

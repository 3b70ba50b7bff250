import {
  ExecTimeoutError,
  OutputLimitExceededError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
  SandboxUnavailableError,
} from '../../errors.js';
import type { RunResult } from '../../host/command-runner.js';
import { argvTooLong, MAX_ARGV_BYTES, MAX_CHANNEL_ARGV_BYTES } from '../argv-limit.js';
import { withSizes } from '../exec-result.js';
import { FILE_EXIT, READ_FILE, TIMEOUT_WRAPPER, WRITE_FILE } from '../exec-scripts.js';
import { ExecChannelPool } from '../exec-channel/channel-pool.js';
import type { ExecAgentKind } from '../exec-channel/native-agent.js';
import type { ChannelOutcome } from '../exec-channel/types.js';
import { dirname, basename } from 'node:path';
import { tarArchive } from '../../host/tar.js';
import { EXEC_OUTPUT_LIMIT, READ_FILE_LIMIT, type ApartAccess, type ExecOptions, type ExecResult, type Sandbox } from '../types.js';
import type { DockerCli } from './docker-cli.js';
import { lastLines } from './docker-cli.js';

/** Host-side grace past an exec's own timeout before the docker client itself is killed. */
const HOST_TIMEOUT_GRACE_MS = 5_000;
/** File transfers get this long (they are bounded by READ_FILE_LIMIT anyway). */
const FILE_TIMEOUT_MS = 120_000;
/** Limit for the `docker exec` that kills a timed-out command's process group. */
const KILL_TIMEOUT_MS = 15_000;

export interface ContainerSandboxOptions {
  /**
   * Run exec and file I/O through persistent exec channels inside the container (default true):
   * a few ms a call instead of a `docker exec` each. False: one `docker exec` per call.
   */
  execChannel?: boolean;
  /** The exec channels' agent (default `native`; `sh`: the shell agent only). */
  execAgent?: ExecAgentKind;
  /** Told once when this sandbox falls back from its exec channel to plain docker exec. */
  onNotice?: (message: string) => void;
  /**
   * A user other than the container's own gets a channel only from its second call; its first
   * runs as a plain exec (default false: a channel from the first call). For callers that probe
   * once as another user (Inspect asks for root at each sample's start), where a channel's
   * start would cost more than the probe.
   */
  channelOnSecondCall?: boolean;
  /**
   * File reads and writes honour permission bits even as root (default false): a file no bit
   * lets anyone read (write) is refused, as Inspect's docker sandbox refuses it.
   */
  fileModes?: boolean;
  /** What the engine said of the container when it started, for callers that need it. */
  info?: ContainerInfo;
}

/** Facts of a started container, from `docker inspect`. */
export interface ContainerInfo {
  /** The container's name (without Docker's leading `/`). */
  name: string;
  /** The image's or compose file's `user`; empty: root. */
  user: string;
  /** The working directory commands start in; `/` when the image sets none. */
  workingDir: string;
}

/**
 * One running container of a sample. Exec and file I/O go straight to the container, never
 * through `compose exec`, which costs a compose start-up per call: through an exec channel
 * when one can run there, else one `docker exec` per call.
 */
export class ContainerSandbox implements Sandbox {
  private readonly channels?: ExecChannelPool;
  /** Users (other than the container's own) that have run a command, for channelOnSecondCall. */
  private readonly usersSeen = new Set<string>();
  readonly info?: ContainerInfo;

  constructor(
    private readonly docker: DockerCli,
    readonly containerId: string,
    readonly service: string,
    private readonly options: ContainerSandboxOptions = {},
  ) {
    this.info = options.info;
    if (options.execChannel !== false) {
      this.channels = new ExecChannelPool({
        host: {
          runner: docker.runner,
          docker: docker.binary,
          containerId,
          kill: (pids, user) => this.kill(pids, user),
          ...(docker.engine && { startExec: (cmd: string[], user: string | undefined) => docker.engine!.start(containerId, cmd, user) }),
        },
        service,
        onNotice: options.onNotice,
        agent: options.execAgent,
      });
    }
  }

  describe(): string {
    return `docker:${this.containerId.slice(0, 12)}`;
  }

  /**
   * Files put with `docker cp` (the engine extracts the tar; the container runs nothing), and
   * commands run with a `docker exec` of their own, never the exec channel or a shell.
   */
  readonly apart: ApartAccess = {
    putFiles: async (dir, files) => {
      const name = basename(dir);
      const tar = tarArchive([
        { path: name, type: '5', mode: 0o755 },
        ...files.map((f) => ({ path: `${name}/${f.name}`, type: '0' as const, mode: f.mode, data: f.data })),
      ]);
      if (this.docker.engine) {
        try {
          return await this.docker.engine.putArchive(this.containerId, dirname(dir), tar);
        } catch (e) {
          throw await this.engineFailure(e, 'copying into');
        }
      }
      const r = await this.docker.runner.run([this.docker.binary, 'cp', '-', `${this.containerId}:${dirname(dir)}`], { input: tar, timeoutMs: FILE_TIMEOUT_MS });
      this.checkDaemonError(r);
      if (r.code !== 0) throw new Error(`copying into ${this.service} failed: ${lastLines(r.stderr.toString('utf8'), 3)}`);
    },
    execFresh: async (cmd, o) => {
      if (this.docker.engine) {
        let r;
        try {
          r = await this.docker.engine.runOnce(this.containerId, cmd, { ...o, maxOutput: EXEC_OUTPUT_LIMIT });
        } catch (e) {
          throw await this.engineFailure(e, 'an exec in');
        }
        if (r.code === null && !r.timedOut) {
          // The engine lost the exec (it restarted, or its connection broke): how it ended is
          // unknown, which is no verdict on what ran. The caller's work is infrastructure's failure.
          if (!(await this.isAlive())) throw new SandboxUnavailableError(`sandbox ${this.service} is gone (the Docker Engine lost an exec in it)`);
          throw new SandboxUnavailableError(`the Docker Engine lost an exec in ${this.service}: its exit code is unknown (the engine restarted, or its connection broke)`);
        }
        return { code: r.code ?? 137, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'), timedOut: r.timedOut };
      }
      const args = ['exec', ...(o.user ? ['--user', o.user] : []), '--workdir', '/'];
      for (const [k, v] of Object.entries(o.env ?? {})) args.push('--env', `${k}=${v}`);
      const r = await this.docker.runner.run([this.docker.binary, ...args, this.containerId, ...cmd], {
        maxOutput: EXEC_OUTPUT_LIMIT,
        timeoutMs: o.timeoutMs,
      });
      if (!r.timedOut) this.checkDaemonError(r);
      return { code: r.code ?? 137, stdout: r.stdout.toString('utf8'), stderr: r.stderr.toString('utf8'), timedOut: r.timedOut === true };
    },
  };

  /**
   * Starts the exec channel for the container's default user; resolves when it is ready or has
   * failed (calls then run plain). Immediate without channels.
   */
  warm(): Promise<void> {
    return this.channels?.warm() ?? Promise.resolve();
  }

  /** Closes the exec channels (they also end with the container). */
  async close(): Promise<void> {
    await this.channels?.close();
  }

  async exec(cmd: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (cmd.length === 0) throw new Error('exec needs a command');
    const channel = this.channels && this.channelFor(options.user);
    // The channel sends argv in its own frames: only plain docker exec needs the lower cap.
    const tooLong = argvTooLong(cmd, channel ? MAX_CHANNEL_ARGV_BYTES : MAX_ARGV_BYTES);
    if (tooLong) return { success: false, returncode: 126, stdout: '', stderr: tooLong };
    const timeout = options.timeout;
    if (channel) {
      const o = await this.channels!.exec(cmd, options, {
        timeoutMs: timeout !== undefined ? timeout * 1000 : undefined,
        maxOutput: options.maxOutput ?? EXEC_OUTPUT_LIMIT,
        signal: options.signal,
      });
      if (o.kind === 'done') {
        const stdout = o.stdout.toString('utf8');
        const stderr = o.stderr.toString('utf8');
        if (o.timedOut) throw new ExecTimeoutError(`Command timed out after ${timeout} s: ${cmd.join(' ').slice(0, 200)}`, stdout, stderr);
        return withSizes({ success: o.code === 0, returncode: o.code, stdout, stderr }, o.stdoutTotal - o.stdout.length, o.stderrTotal - o.stderr.length, o.stdout.length, o.stderr.length);
      }
      if (o.kind === 'lost') return this.lost(o.reason);
      const plainTooLong = argvTooLong(cmd);
      if (plainTooLong) return { success: false, returncode: 126, stdout: '', stderr: plainTooLong };
    }
    return this.plainExec(cmd, options);
  }

  /** Whether a call as `user` takes a channel (see channelOnSecondCall). */
  private channelFor(user: string | undefined): boolean {
    if (!this.options.channelOnSecondCall || user === undefined || this.usersSeen.has(user)) return true;
    this.usersSeen.add(user);
    return false;
  }

  /**
   * The channel died under a running command (a task's `kill -9 -1`, or the container going
   * away): its exit code is unknown, so it reads as killed, unless the container itself is gone.
   */
  private async lost(reason: string): Promise<ExecResult> {
    if (!(await this.isAlive())) throw new SandboxUnavailableError(`sandbox ${this.service} is gone (${reason})`);
    return { success: false, returncode: 137, stdout: '', stderr: `ct: the command's exec channel was killed (${reason})\n` };
  }

  private async plainExec(cmd: string[], options: ExecOptions): Promise<ExecResult> {
    const args = ['exec', '-i'];
    if (options.user) args.push('--user', options.user);
    if (options.cwd) args.push('--workdir', options.cwd);
    for (const [k, v] of Object.entries(options.env ?? {})) args.push('--env', `${k}=${v}`);
    args.push(this.containerId);
    const timeout = options.timeout;
    if (timeout !== undefined) args.push('sh', '-c', TIMEOUT_WRAPPER, 'sh', String(Math.max(1, Math.ceil(timeout))));
    args.push(...cmd);
    const started = Date.now();
    const r = await this.docker.runner.run([this.docker.binary, ...args], {
      input: options.input,
      maxOutput: options.maxOutput ?? EXEC_OUTPUT_LIMIT,
      signal: options.signal,
      timeoutMs: timeout !== undefined ? timeout * 1000 + HOST_TIMEOUT_GRACE_MS : undefined,
    });
    const stdout = r.stdout.toString('utf8');
    const stderr = r.stderr.toString('utf8');
    if (timeout !== undefined && (r.timedOut || (r.code === 137 && Date.now() - started >= timeout * 1000 - 50))) {
      throw new ExecTimeoutError(`Command timed out after ${timeout} s: ${cmd.join(' ').slice(0, 200)}`, stdout, stderr);
    }
    this.checkDaemonError(r);
    const returncode = r.code ?? 137;
    return withSizes({ success: returncode === 0, returncode, stdout, stderr }, r.stdoutDropped ?? 0, r.stderrDropped ?? 0, r.stdout.length, r.stderr.length);
  }

  async writeFile(path: string, contents: string | Uint8Array): Promise<void> {
    const r = await this.fileScript(WRITE_FILE, path, contents, EXEC_OUTPUT_LIMIT);
    this.checkDaemonError(r);
    this.checkFileExit(r, path);
  }

  readFile(path: string, format?: 'text'): Promise<string>;
  readFile(path: string, format: 'bytes'): Promise<Uint8Array>;
  async readFile(path: string, format: 'text' | 'bytes' = 'text'): Promise<string | Uint8Array> {
    const r = await this.fileScript(READ_FILE, path, undefined, READ_FILE_LIMIT + 1);
    this.checkDaemonError(r);
    // Before the exit code: a reader cut off past its limit makes `cat` fail too.
    if (r.stdoutTruncated || r.stdout.length > READ_FILE_LIMIT) {
      throw new OutputLimitExceededError(`${path} is larger than the ${READ_FILE_LIMIT / 1024 / 1024} MiB read limit`);
    }
    this.checkFileExit(r, path);
    return format === 'bytes' ? new Uint8Array(r.stdout) : r.stdout.toString('utf8');
  }

  /** Runs READ_FILE or WRITE_FILE as the container's default user, through a channel when possible. */
  private async fileScript(script: string, path: string, input: string | Uint8Array | undefined, maxOutput: number): Promise<RunResult> {
    const argv = ['sh', '-c', script, 'sh', path, ...(this.options.fileModes ? ['modes'] : [])];
    if (this.channels) {
      const o = await this.channels.exec(argv, { input }, { timeoutMs: FILE_TIMEOUT_MS, maxOutput });
      if (o.kind === 'done') return runResult(o);
      // `not-started` or `lost`: both scripts are safe to run again.
    }
    return this.docker.runner.run([this.docker.binary, 'exec', ...(input !== undefined ? ['-i'] : []), this.containerId, ...argv], {
      input,
      maxOutput,
      timeoutMs: FILE_TIMEOUT_MS,
    });
  }

  /** SIGKILL to pids (negative: process groups) in the container, as the user that owns them. */
  private async kill(pids: string[], user: string | undefined): Promise<void> {
    await this.docker
      .call(['exec', ...(user ? ['--user', user] : []), this.containerId, 'sh', '-c', 'kill -KILL "$@" 2>/dev/null; exit 0', 'sh', ...pids], {
        timeoutMs: KILL_TIMEOUT_MS,
      })
      .catch(() => {});
  }

  async isAlive(): Promise<boolean> {
    const r = await this.docker.call(['inspect', '--format', '{{.State.Running}}', this.containerId], {
      idempotent: true,
      timeoutMs: 15_000,
    });
    return r.code === 0 && r.stdout.toString('utf8').trim() === 'true';
  }

  /** An Engine API refusal or connection error: the sandbox is gone, or the operation failed. */
  private async engineFailure(e: unknown, what: string): Promise<Error> {
    const message = e instanceof Error ? e.message : String(e);
    if (/No such container|is not running|ECONNREFUSED|ENOENT/.test(message) || !(await this.isAlive())) {
      return new SandboxUnavailableError(`sandbox ${this.service} is gone: ${message}`);
    }
    return new Error(`${what} ${this.service} failed: ${message}`);
  }

  /** Docker's own failures (container gone, daemon away) are infrastructure, not the command's. */
  private checkDaemonError(r: RunResult): void {
    if (r.code === 0 || r.timedOut) {
      if (r.timedOut) throw new SandboxUnavailableError(`docker exec in ${this.service} did not return`);
      return;
    }
    const err = r.stderr.toString('utf8');
    if (/^Error( response from daemon)?: (No such container|Container [0-9a-f]+ is not running)|Cannot connect to the Docker daemon/m.test(err)) {
      throw new SandboxUnavailableError(`sandbox ${this.service} is gone: ${lastLines(err, 2)}`);
    }
  }

  private checkFileExit(r: RunResult, path: string): void {
    switch (r.code) {
      case 0:
        return;
      case FILE_EXIT.notFound:
        throw new SandboxFileNotFoundError(`File not found: ${path}`);
      case FILE_EXIT.isDirectory:
        throw new SandboxIsADirectoryError(`Is a directory: ${path}`);
      case FILE_EXIT.permission:
        throw new SandboxPermissionError(`Permission denied: ${path}`);
      default:
        throw new SandboxUnavailableError(`file transfer for ${path} failed: ${lastLines(r.stderr.toString('utf8'), 3)}`);
    }
  }
}

function runResult(o: Extract<ChannelOutcome, { kind: 'done' }>): RunResult {
  return {
    code: o.code,
    stdout: o.stdout,
    stderr: o.stderr,
    timedOut: o.timedOut,
    stdoutTruncated: o.stdoutTotal > o.stdout.length,
    stderrTruncated: o.stderrTotal > o.stderr.length,
  };
}

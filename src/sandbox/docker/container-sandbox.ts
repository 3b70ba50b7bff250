import {
  ExecTimeoutError,
  OutputLimitExceededError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
  SandboxUnavailableError,
} from '../../errors.js';
import type { RunResult } from '../../host/command-runner.js';
import { FILE_EXIT, READ_FILE, TIMEOUT_WRAPPER, WRITE_FILE } from '../exec-scripts.js';
import { EXEC_OUTPUT_LIMIT, READ_FILE_LIMIT, type ExecOptions, type ExecResult, type Sandbox } from '../types.js';
import type { DockerCli } from './docker-cli.js';
import { lastLines } from './docker-cli.js';

/** Host-side grace past an exec's own timeout before the docker client itself is killed. */
const HOST_TIMEOUT_GRACE_MS = 5_000;
/** File transfers get this long (they are bounded by READ_FILE_LIMIT anyway). */
const FILE_TIMEOUT_MS = 120_000;

/**
 * One running container of a sample. Exec and file I/O go straight to the container
 * (`docker exec`), never through `compose exec`, which costs a compose start-up per call.
 */
export class ContainerSandbox implements Sandbox {
  constructor(
    private readonly docker: DockerCli,
    readonly containerId: string,
    readonly service: string,
  ) {}

  describe(): string {
    return `docker:${this.containerId.slice(0, 12)}`;
  }

  async exec(cmd: string[], options: ExecOptions = {}): Promise<ExecResult> {
    if (cmd.length === 0) throw new Error('exec needs a command');
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
      maxOutput: EXEC_OUTPUT_LIMIT,
      timeoutMs: timeout !== undefined ? timeout * 1000 + HOST_TIMEOUT_GRACE_MS : undefined,
    });
    const stdout = r.stdout.toString('utf8');
    const stderr = r.stderr.toString('utf8');
    if (timeout !== undefined && (r.timedOut || (r.code === 137 && Date.now() - started >= timeout * 1000 - 50))) {
      throw new ExecTimeoutError(`Command timed out after ${timeout} s: ${cmd.join(' ').slice(0, 200)}`, stdout, stderr);
    }
    this.checkDaemonError(r);
    const returncode = r.code ?? 137;
    return { success: returncode === 0, returncode, stdout, stderr };
  }

  async writeFile(path: string, contents: string | Uint8Array): Promise<void> {
    const r = await this.docker.runner.run(
      [this.docker.binary, 'exec', '-i', this.containerId, 'sh', '-c', WRITE_FILE, 'sh', path],
      { input: contents, timeoutMs: FILE_TIMEOUT_MS },
    );
    this.checkDaemonError(r);
    this.checkFileExit(r, path);
  }

  readFile(path: string, format?: 'text'): Promise<string>;
  readFile(path: string, format: 'bytes'): Promise<Uint8Array>;
  async readFile(path: string, format: 'text' | 'bytes' = 'text'): Promise<string | Uint8Array> {
    const r = await this.docker.runner.run(
      [this.docker.binary, 'exec', this.containerId, 'sh', '-c', READ_FILE, 'sh', path],
      { maxOutput: READ_FILE_LIMIT + 1, timeoutMs: FILE_TIMEOUT_MS },
    );
    this.checkDaemonError(r);
    this.checkFileExit(r, path);
    if (r.stdoutTruncated || r.stdout.length > READ_FILE_LIMIT) {
      throw new OutputLimitExceededError(`${path} is larger than the ${READ_FILE_LIMIT / 1024 / 1024} MiB read limit`);
    }
    return format === 'bytes' ? new Uint8Array(r.stdout) : r.stdout.toString('utf8');
  }

  async isAlive(): Promise<boolean> {
    const r = await this.docker.call(['inspect', '--format', '{{.State.Running}}', this.containerId], {
      idempotent: true,
      timeoutMs: 15_000,
    });
    return r.code === 0 && r.stdout.toString('utf8').trim() === 'true';
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

/**
 * The sandbox seam. A *provider* (docker, local, ssh, ...) turns an environment into running
 * sandboxes; a *sandbox* is one service of one sample, where tools and scorers run.
 *
 * Lifecycle (each provider honours it, and the conformance suite checks it):
 *   taskInit(env)      once per environment per run: build or pull images.
 *   sampleInit(env)    once per sample: start the services; returns them, `default` first.
 *   sampleCleanup(s)   once per sample, always (also after errors and on Ctrl-C).
 *   taskCleanup()      once per run: remove whatever a sample left behind.
 *   sweep()            on demand (`ct sandbox cleanup`) and at start-up: remove resources whose
 *                      owning process is gone.
 */

export interface ExecOptions {
  /** Sent to the command's standard input, then closed. */
  input?: string | Uint8Array;
  cwd?: string;
  env?: Record<string, string>;
  user?: string;
  /** Seconds. The process tree is killed inside the sandbox when it passes. */
  timeout?: number;
  /** Bytes kept per output stream, the tail (default EXEC_OUTPUT_LIMIT). */
  maxOutput?: number;
  /**
   * Aborting kills the command's process tree inside the sandbox, as a timeout does; the call
   * then ends as the command did (killed). Providers that cannot kill ignore it.
   */
  signal?: AbortSignal;
}

export interface ExecResult {
  success: boolean;
  returncode: number;
  stdout: string;
  stderr: string;
  /**
   * Set when a stream passed EXEC_OUTPUT_LIMIT, so only its tail is in stdout/stderr: the bytes
   * the command wrote to it in all. Providers that cannot count leave them unset.
   */
  stdoutBytes?: number;
  stderrBytes?: number;
}

/** Cap per output stream; past it the tail is kept (as Inspect does). */
export const EXEC_OUTPUT_LIMIT = 10 * 1024 * 1024;
/** Cap for readFile. */
export const READ_FILE_LIMIT = 100 * 1024 * 1024;

export interface Sandbox {
  /** The compose service this sandbox is (`default` for the agent's). */
  readonly service: string;
  exec(cmd: string[], options?: ExecOptions): Promise<ExecResult>;
  /** Creates parent directories. */
  writeFile(path: string, contents: string | Uint8Array): Promise<void>;
  readFile(path: string, format?: 'text'): Promise<string>;
  readFile(path: string, format: 'bytes'): Promise<Uint8Array>;
  /** False when the service's container (or directory) is gone or stopped. */
  isAlive(): Promise<boolean>;
  /** A description for the log (`docker:<container>`, `local:<dir>`). */
  describe(): string;
  /**
   * Work apart from the agent (scoring, tamper checks; see scoring/isolated-scorer.ts), where the
   * sandbox can do it: absent for sandboxes that cannot keep the agent out (`local`).
   */
  readonly apart?: ApartAccess;
}

/** What ct does in a sandbox without anything the agent could have touched on the way. */
export interface ApartAccess {
  /**
   * Creates the directory `dir` (absolute; its parent must exist) holding `files`, through the
   * engine itself: nothing in the sandbox runs to create them.
   */
  putFiles(dir: string, files: ReadonlyArray<{ name: string; data: Buffer; mode: number }>): Promise<void>;
  /**
   * Runs `cmd` (argv[0] an absolute path) in a fresh exec of its own: no exec channel, no shell
   * from the sandbox. `env` is given to it as is, over what the engine adds from the image.
   * Resolves with its exit code and output; `timedOut` when `timeoutMs` passed (the host end is
   * then cut off; the command's own limit should have ended it first).
   */
  execFresh(cmd: string[], options: { env?: Record<string, string>; timeoutMs: number; user?: string }): Promise<{ code: number; stdout: string; stderr: string; timedOut: boolean }>;
}

/**
 * The sandboxes of one sample, by service name; the agent's service comes first: `default`, or (for
 * `ct sandbox serve` only, see DockerProviderOptions.xDefault) the one marked `x-default: true`.
 */
export type SampleSandboxes = Map<string, Sandbox>;

/** What a provider needs to know of an environment. */
export interface SandboxEnvSpec {
  /** Environment id (folder name). */
  name: string;
  /** Absolute path of the compose file. */
  composeFile: string;
}

export interface SampleInitContext {
  /** A short label for names (sample id and epoch). */
  label: string;
  signal?: AbortSignal;
  /** Variables for the compose commands that start the sample (e.g. SAMPLE_METADATA_*, as Inspect sets). */
  env?: Record<string, string>;
  /**
   * Told what this sample's sandboxes want on record (an exec channel falling back to docker
   * exec, once per sandbox); the runner writes it into the sample's log.
   */
  onNotice?: (message: string) => void;
}

export interface SweepReport {
  removed: string[];
  kept: string[];
}

export interface SandboxProvider {
  readonly name: string;
  taskInit(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void>;
  sampleInit(env: SandboxEnvSpec, ctx: SampleInitContext): Promise<SampleSandboxes>;
  sampleCleanup(sandboxes: SampleSandboxes): Promise<void>;
  taskCleanup(): Promise<void>;
  sweep(options?: { all?: boolean }): Promise<SweepReport>;
  /** Fails with instructions when the provider's host is not usable (e.g. Docker not running). */
  preflight?(): Promise<void>;
  /** Releases connections and machines (SSH, EC2) at the end of a run. */
  close?(): Promise<void>;
}

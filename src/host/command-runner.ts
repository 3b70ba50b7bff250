/**
 * Runs a program on the machine that hosts the sandboxes: this one (spawn) or a remote one
 * (over SSH). The docker provider speaks only to this interface, so the same provider drives a
 * local or a remote Docker Engine.
 */
export interface RunOptions {
  input?: string | Uint8Array;
  /** Kill the program after this many milliseconds (the result then has timedOut). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Per-stream cap in bytes; the tail is kept. Default 10 MiB. */
  maxOutput?: number;
  env?: Record<string, string>;
}

export interface RunResult {
  /** Exit code, or null when killed by a signal. */
  code: number | null;
  stdout: Buffer;
  stderr: Buffer;
  timedOut: boolean;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /** Bytes cut from the front of each stream by maxOutput (the original size is this plus the kept length). */
  stdoutDropped?: number;
  stderrDropped?: number;
}

/** A long-lived program with open pipes (used by the persistent exec channel). */
export interface RunningProcess {
  readonly stdin: NodeJS.WritableStream;
  readonly stdout: NodeJS.ReadableStream;
  readonly stderr: NodeJS.ReadableStream;
  /** Resolves with the exit code (null when killed) when the program ends. */
  readonly exited: Promise<number | null>;
  kill(): void;
}

export interface CommandRunner {
  /** For messages: `local` or `ssh://user@host:port`. */
  readonly target: string;
  run(argv: string[], options?: RunOptions): Promise<RunResult>;
  start(argv: string[], options?: { env?: Record<string, string> }): Promise<RunningProcess>;
  /** Writes a file on the host (parents created), e.g. compose overrides. */
  writeFile(path: string, data: string | Uint8Array): Promise<void>;
  removeFile(path: string): Promise<void>;
  /** A private scratch folder on the host for this process. */
  readonly scratchDir: string;
}

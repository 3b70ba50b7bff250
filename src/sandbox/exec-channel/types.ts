/**
 * The exec channel: a shell that stays open inside a sandbox and runs commands on request,
 * instead of one `docker exec` per command (~85-280 ms each; a channel answers a short command
 * in a few ms).
 *
 * Glossary:
 *   agent     the program running inside the container, one per channel: the native binary
 *             (native/ct-exec-agent.c) where it runs, else the sh program CHANNEL_AGENT.
 *   channel   one agent plus the host process feeding it (`docker exec -i ... sh -c AGENT`);
 *             runs one command at a time.
 *   pool      the channels of one sandbox, grouped by the user they run as.
 *   plain     the fallback: one `docker exec` per command, as without a channel.
 *   reader    (sh agent) a `cat` inside the container that drains one output stream (stdout
 *             or stderr) of a batch of 32 calls, one FIFO per call. The native agent has none.
 */
import type { CommandRunner, RunningProcess } from '../../host/command-runner.js';

/** What a channel needs of the Docker host. */
export interface ChannelHost {
  runner: CommandRunner;
  /** The docker binary on the host. */
  docker: string;
  containerId: string;
  /**
   * Starts `docker exec -i [--user U] CONTAINER cmd...` without the docker CLI (a local engine's
   * API, see EngineExec); when absent, or when it cannot reach the engine, the CLI is used.
   */
  startExec?(cmd: string[], user: string | undefined): Promise<ChannelProcess>;
  /**
   * Sends SIGKILL to pids (negative: process groups) inside the container, as `user` (the
   * channel's own), never as root: the pids come from the agent, which a command running as
   * that user could forge, so the kill must not reach further than the command itself could.
   */
  kill(pids: string[], user: string | undefined): Promise<void>;
}

/** A channel's `docker exec`. */
export interface ChannelProcess extends RunningProcess {
  /**
   * The exec's pid on this machine, where its engine runs on this machine's kernel (a local
   * engine) and a channel may give its agent a socket to connect to (through /proc/<pid>/cwd);
   * undefined if it cannot be told.
   */
  hostPid?(): Promise<number | undefined>;
}

/** One command for a channel, already checked to be expressible (see encodeChannelCommand). */
export interface ChannelCommand {
  /** The sh script that sets argv, cwd and env (single-quoted words only). */
  readonly script: Buffer;
  input: Buffer;
  /** The same command for the native agent (see native-agent.ts). */
  readonly native: Buffer;
}

export interface ChannelRunOptions {
  /** Kill the command's process group after this many ms (ExecOptions.timeout). */
  timeoutMs?: number;
  /** Bytes kept per stream; past it the tail is kept. */
  maxOutput: number;
  /** Aborting kills the command's process group, as the timeout does (without `timedOut`). */
  signal?: AbortSignal;
}

/**
 * How a call on a channel ended:
 *   done         the command ran; `timedOut` when it was killed at its timeout.
 *   not-started  the command never started (cwd or command missing, channel gone before it
 *                started): running it with plain docker exec is safe and gives docker's own error.
 *   lost         the channel died while the command ran: its outcome is unknown.
 */
export type ChannelOutcome =
  | {
      kind: 'done';
      code: number;
      stdout: Buffer;
      stderr: Buffer;
      /** Bytes the command wrote, before the cap. */
      stdoutTotal: number;
      stderrTotal: number;
      timedOut: boolean;
    }
  | { kind: 'not-started'; reason: string }
  | { kind: 'lost'; reason: string };

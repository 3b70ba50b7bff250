import { randomUUID } from 'node:crypto';
import {
  ExecTimeoutError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
  SandboxUnavailableError,
} from '../../errors.js';
import type { Transcript } from '../../log/transcript.js';
import type { ToolCall, ToolCallError } from '../../log/types.js';
import type { Sandbox } from '../../sandbox/types.js';

export interface ToolOutcome {
  /** What the model is shown (possibly truncated). */
  output: string;
  error?: ToolCallError;
  /** Set by the submit tool. */
  submitted?: string;
}

export interface AgentToolsOptions {
  /** Seconds a bash call may run (default 180). */
  bashTimeout: number;
  /**
   * Characters of tool output shown to the model (default 16000): the first and last half. The
   * log keeps the same, plus the output's last LOGGED_OUTPUT_TAIL_BYTES and its true size.
   */
  modelOutputLimit: number;
}

export const DEFAULT_TOOL_OPTIONS: AgentToolsOptions = { bashTimeout: 180, modelOutputLimit: 16_000 };

/**
 * Which shell the bash tool runs commands with in a sandbox: prints bash's path where the image
 * has it, else `sh`. Asked once per sample, right after the first bash call (which runs through
 * BASH_OR_SH, so it costs one exec as before), while the model reads that call's output; later
 * calls exec the shell directly, without an sh in front (on an exec channel, one process start).
 */
const SHELL_PROBE = 'command -v bash || echo sh';
/** Runs `$1` with bash where the image has it, else with sh: for calls made before the probe answered. */
const BASH_OR_SH = 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; else exec sh -c "$1"; fi';
/**
 * The shell program (for BASH_OR_SH's `$1`) that runs a command sent on stdin: read whole, then
 * evaluated in the same shell, so it never becomes one argument of an exec. The command then
 * sees an empty stdin, as it does when passed as an argument.
 */
const EVAL_STDIN = 'ct_cmd=$(cat) || exit 126; eval "unset ct_cmd; $ct_cmd"';
/**
 * Commands longer than this (bytes, default 16 KiB) travel on stdin: an exec's arguments may
 * take at most MAX_ARGV_BYTES (96 KiB, quotes counted 4 times). Shorter ones stay an argument,
 * which costs no extra process (reading stdin takes a `cat`, ~1-2 ms).
 */
const ARGUMENT_COMMAND_LIMIT = 16 * 1024;
/** Longest bash command the tool runs (1 MiB); a longer one fails with a message saying so. */
export const BASH_COMMAND_LIMIT = 1024 * 1024;
/**
 * Bytes of the end of a truncated output kept in the tool event besides what the model saw
 * (default 64 KiB): the end of a long output (a failing build's last errors) is what one reads
 * the log for, and the rest would make every log megabytes long.
 */
export const LOGGED_OUTPUT_TAIL_BYTES = 64 * 1024;

class ToolFailure extends Error {
  constructor(
    readonly type: ToolCallError['type'],
    message: string,
  ) {
    super(message);
  }
}

/**
 * bash, text_editor and submit, bound to a sample's `default` sandbox. Every call is recorded
 * as a `tool` event and answered with a `tool` message, the way Inspect records tool use.
 */
export class AgentTools {
  private readonly history = new Map<string, string[]>();
  /** The sandbox's shell for bash calls (SHELL_PROBE), once known. */
  private shell?: Promise<'bash' | 'sh' | undefined>;

  constructor(
    private readonly sandbox: Sandbox,
    private readonly transcript: Transcript,
    private readonly options: AgentToolsOptions = DEFAULT_TOOL_OPTIONS,
  ) {}

  /** Runs one tool call (already recorded by the caller in an assistant message). */
  async call(call: ToolCall): Promise<ToolOutcome> {
    const event = this.transcript.event({
      event: 'tool',
      type: 'function',
      id: call.id,
      function: call.function,
      arguments: call.arguments,
      result: '',
      events: [],
      pending: true,
    });
    const started = performance.now();
    let full = '';
    /** Output bytes the sandbox's cap cut before `full` was built (10 MiB per stream). */
    let dropped = 0;
    let error: ToolCallError | undefined;
    let submitted: string | undefined;
    try {
      switch (call.function) {
        case 'bash':
          ({ text: full, dropped } = await this.bash(stringArg(call, 'cmd')));
          break;
        case 'text_editor':
          full = await this.textEditor(call.arguments);
          break;
        case 'submit':
          submitted = String(call.arguments.answer ?? '');
          full = submitted;
          break;
        default:
          throw new ToolFailure('parsing', `unknown tool "${call.function}"; tools are bash, text_editor, submit`);
      }
    } catch (e) {
      if (e instanceof SandboxUnavailableError) throw e;
      error = toToolError(e);
      full = error.message;
    }
    const shown = truncate(full, this.options.modelOutputLimit, dropped);
    delete event.pending;
    // The event holds what the model saw, as Inspect's do; `truncated` is [original bytes, bytes
    // shown]. A truncated output's last bytes are kept beside it, bounded, for whoever reads the log.
    event.result = shown;
    if (shown.length !== full.length || dropped > 0) {
      const original = Buffer.byteLength(full) + dropped;
      const tail = lastBytes(full, LOGGED_OUTPUT_TAIL_BYTES);
      event.truncated = [original, Buffer.byteLength(shown)];
      event.metadata = {
        ...event.metadata,
        output_bytes: original,
        output_tail: tail,
        output_note:
          `The output was ${original} bytes; the result is what the model saw. ` +
          `output_tail holds the output's last ${Buffer.byteLength(tail)} bytes; the rest was not kept.`,
      };
    }
    if (error) event.error = error;
    event.completed = new Date().toISOString();
    event.working_time = (performance.now() - started) / 1000;
    this.transcript.message({
      role: 'tool',
      content: shown,
      tool_call_id: call.id,
      function: call.function,
      ...(error ? { error } : {}),
    });
    return { output: shown, error, submitted };
  }

  /** Runs a command; `dropped` counts output bytes the sandbox's cap cut from the front of either stream. */
  private async bash(cmd: string): Promise<{ text: string; dropped: number }> {
    const size = Buffer.byteLength(cmd);
    if (size > BASH_COMMAND_LIMIT) {
      throw new ToolFailure(
        'limit',
        `The command is ${size} bytes; the bash tool runs commands of up to ${BASH_COMMAND_LIMIT} bytes (1 MiB). ` +
          'Write long content to files in parts (text_editor create, or several shorter commands), then run them.',
      );
    }
    const viaStdin = size > ARGUMENT_COMMAND_LIMIT;
    const program = viaStdin ? EVAL_STDIN : cmd;
    const shell = this.shell ? await this.shell : undefined;
    try {
      const r = await this.sandbox.exec(shell ? [shell, '-c', program] : ['sh', '-c', BASH_OR_SH, 'sh', program], {
        timeout: this.options.bashTimeout,
        ...(viaStdin ? { input: cmd } : {}),
      });
      let out = r.stdout;
      if (r.stderr) out += (out && !out.endsWith('\n') ? '\n' : '') + r.stderr;
      if (r.returncode !== 0) out += `${out && !out.endsWith('\n') ? '\n' : ''}[exit code ${r.returncode}]`;
      const cut = (total: number | undefined, kept: string) => (total === undefined ? 0 : Math.max(0, total - Buffer.byteLength(kept)));
      return { text: out, dropped: cut(r.stdoutBytes, r.stdout) + cut(r.stderrBytes, r.stderr) };
    } catch (e) {
      if (e instanceof ExecTimeoutError) {
        throw new ToolFailure('timeout', `Command timed out after ${this.options.bashTimeout} s.\n${e.stdout}${e.stderr}`);
      }
      throw e;
    } finally {
      this.shell ??= this.probeShell();
    }
  }

  /** bash or sh (SHELL_PROBE); undefined when the sandbox did not answer (asked again after the next call). */
  private probeShell(): Promise<'bash' | 'sh' | undefined> {
    return this.sandbox.exec(['sh', '-c', SHELL_PROBE], { timeout: 60 }).then(
      (r) => {
        const said = r.stdout.trim();
        if (r.returncode === 0 && said.startsWith('/')) return 'bash';
        if (r.returncode === 0 && said === 'sh') return 'sh';
        this.shell = undefined;
        return undefined;
      },
      () => {
        // A sandbox gone is reported by the next call itself.
        this.shell = undefined;
        return undefined;
      },
    );
  }

  private async textEditor(args: Record<string, unknown>): Promise<string> {
    const command = String(args.command ?? '');
    const path = String(args.path ?? '');
    if (!path.startsWith('/')) throw new ToolFailure('parsing', `path must be absolute, got "${path}"`);
    switch (command) {
      case 'view': {
        const isDir = await this.sandbox.exec(['test', '-d', path]);
        if (isDir.returncode === 0) {
          const r = await this.sandbox.exec(['find', path, '-maxdepth', '2', '-not', '-path', '*/.*']);
          return r.stdout;
        }
        const text = await this.sandbox.readFile(path);
        const lines = text.split('\n');
        const range = Array.isArray(args.view_range) ? (args.view_range as number[]) : undefined;
        const start = range ? Math.max(1, range[0]!) : 1;
        const end = range && range[1] !== undefined && range[1] !== -1 ? range[1] : lines.length;
        return lines
          .slice(start - 1, end)
          .map((l, i) => `${String(start + i).padStart(6)}\t${l}`)
          .join('\n');
      }
      case 'create': {
        if (typeof args.file_text !== 'string') throw new ToolFailure('parsing', 'create needs file_text');
        await this.remember(path);
        await this.sandbox.writeFile(path, args.file_text);
        return `File created at ${path}`;
      }
      case 'str_replace': {
        if (typeof args.old_str !== 'string') throw new ToolFailure('parsing', 'str_replace needs old_str');
        const text = await this.sandbox.readFile(path);
        const count = text.split(args.old_str).length - 1;
        if (count === 0) throw new ToolFailure('unknown', `old_str was not found in ${path}`);
        if (count > 1) throw new ToolFailure('unknown', `old_str occurs ${count} times in ${path}; make it unique`);
        this.push(path, text);
        await this.sandbox.writeFile(path, text.replace(args.old_str, () => String(args.new_str ?? '')));
        return `Replaced 1 occurrence in ${path}`;
      }
      case 'insert': {
        const at = Number(args.insert_line);
        if (!Number.isInteger(at) || at < 0) throw new ToolFailure('parsing', 'insert needs a whole insert_line >= 0');
        const text = await this.sandbox.readFile(path);
        const lines = text.split('\n');
        if (at > lines.length) throw new ToolFailure('parsing', `insert_line ${at} is past the end (${lines.length} lines)`);
        this.push(path, text);
        lines.splice(at, 0, ...String(args.new_str ?? '').split('\n'));
        await this.sandbox.writeFile(path, lines.join('\n'));
        return `Inserted after line ${at} of ${path}`;
      }
      case 'undo_edit': {
        const prev = this.history.get(path)?.pop();
        if (prev === undefined) throw new ToolFailure('unknown', `no edit of ${path} to undo`);
        await this.sandbox.writeFile(path, prev);
        return `Undid the last edit of ${path}`;
      }
      default:
        throw new ToolFailure('parsing', `unknown text_editor command "${command}" (view, create, str_replace, insert, undo_edit)`);
    }
  }

  private async remember(path: string): Promise<void> {
    try {
      this.push(path, await this.sandbox.readFile(path));
    } catch {
      // A new file: nothing to undo to.
    }
  }

  private push(path: string, text: string): void {
    const h = this.history.get(path) ?? [];
    h.push(text);
    this.history.set(path, h);
  }
}

/** A fresh tool call id in the style model APIs use. */
export function newToolCallId(): string {
  return `call_${randomUUID().replace(/-/g, '').slice(0, 24)}`;
}

function stringArg(call: ToolCall, name: string): string {
  const v = call.arguments[name];
  if (typeof v !== 'string') throw new ToolFailure('parsing', `${call.function} needs a string argument "${name}"`);
  return v;
}

/**
 * What the model is shown of an output: its first and last limit/2 characters. `dropped` bytes
 * were cut from the front before the output was captured, so then the first part is not the start.
 */
function truncate(text: string, limit: number, dropped = 0): string {
  if (text.length <= limit && dropped === 0) return text;
  const half = Math.floor(Math.min(limit, text.length) / 2);
  const total = text.length + dropped;
  const lost = dropped > 0 ? `; the first ${dropped} bytes were not captured, so the part above is not the beginning` : '';
  return `${text.slice(0, half)}\n\n[output truncated: ${total - 2 * half} of ${total} characters omitted${lost}]\n\n${text.slice(-half)}`;
}

/** The last `max` bytes of `text` as UTF-8, starting at a character boundary. */
function lastBytes(text: string, max: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= max) return text;
  let start = buf.length - max;
  while (start < buf.length && (buf[start]! & 0xc0) === 0x80) start++;
  return buf.subarray(start).toString('utf8');
}

function toToolError(e: unknown): ToolCallError {
  if (e instanceof ToolFailure) return { type: e.type, message: e.message };
  if (e instanceof SandboxFileNotFoundError) return { type: 'file_not_found', message: e.message };
  if (e instanceof SandboxPermissionError) return { type: 'permission', message: e.message };
  if (e instanceof SandboxIsADirectoryError) return { type: 'is_a_directory', message: e.message };
  if (e instanceof ExecTimeoutError) return { type: 'timeout', message: e.message };
  return { type: 'unknown', message: e instanceof Error ? e.message : String(e) };
}

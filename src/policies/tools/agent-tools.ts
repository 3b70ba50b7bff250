import { randomUUID } from 'node:crypto';
import {
  ExecTimeoutError,
  SandboxFileNotFoundError,
  SandboxIsADirectoryError,
  SandboxPermissionError,
  SandboxUnavailableError,
} from '../../errors.js';
import type { Transcript } from '../../eval/transcript.js';
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
  /** Characters of tool output shown to the model (default 16000); the log keeps it whole. */
  modelOutputLimit: number;
}

export const DEFAULT_TOOL_OPTIONS: AgentToolsOptions = { bashTimeout: 180, modelOutputLimit: 16_000 };

/** Runs `$1` with bash where the image has it, else with sh, in one exec (no probe round trip). */
const BASH_OR_SH = 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; else exec sh -c "$1"; fi';

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
    let error: ToolCallError | undefined;
    let submitted: string | undefined;
    try {
      switch (call.function) {
        case 'bash':
          full = await this.bash(stringArg(call, 'cmd'));
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
    const shown = truncate(full, this.options.modelOutputLimit);
    delete event.pending;
    event.result = full;
    if (shown.length !== full.length) event.truncated = [Buffer.byteLength(full), Buffer.byteLength(shown)];
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

  private async bash(cmd: string): Promise<string> {
    try {
      const r = await this.sandbox.exec(['sh', '-c', BASH_OR_SH, 'sh', cmd], { timeout: this.options.bashTimeout });
      let out = r.stdout;
      if (r.stderr) out += (out && !out.endsWith('\n') ? '\n' : '') + r.stderr;
      if (r.returncode !== 0) out += `${out && !out.endsWith('\n') ? '\n' : ''}[exit code ${r.returncode}]`;
      return out;
    } catch (e) {
      if (e instanceof ExecTimeoutError) {
        throw new ToolFailure('timeout', `Command timed out after ${this.options.bashTimeout} s.\n${e.stdout}${e.stderr}`);
      }
      throw e;
    }
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

function truncate(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const half = Math.floor(limit / 2);
  return `${text.slice(0, half)}\n\n[output truncated: ${text.length - limit} of ${text.length} characters omitted]\n\n${text.slice(-half)}`;
}

function toToolError(e: unknown): ToolCallError {
  if (e instanceof ToolFailure) return { type: e.type, message: e.message };
  if (e instanceof SandboxFileNotFoundError) return { type: 'file_not_found', message: e.message };
  if (e instanceof SandboxPermissionError) return { type: 'permission', message: e.message };
  if (e instanceof SandboxIsADirectoryError) return { type: 'is_a_directory', message: e.message };
  if (e instanceof ExecTimeoutError) return { type: 'timeout', message: e.message };
  return { type: 'unknown', message: e instanceof Error ? e.message : String(e) };
}

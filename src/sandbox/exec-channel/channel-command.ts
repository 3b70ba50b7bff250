import type { ExecOptions } from '../types.js';
import { encodeNativePayload } from './native-agent.js';
import type { ChannelCommand } from './types.js';

/**
 * Scripts up to this size travel as one line read by the shell's `read` (about 1-2 µs a byte,
 * no process); longer ones as a counted payload, which costs two extra processes (~2 ms) but
 * no per-byte reads.
 */
export const INLINE_SCRIPT_LIMIT = 2048;

/** Environment names the agent can export; `ct_` is the agent's own namespace. */
const ENV_NAME = /^(?!ct_)[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Builds the sh that sets argv, cwd and env for one command, or undefined when the command
 * cannot be expressed exactly (NUL bytes, a relative cwd, env names sh cannot export): the
 * caller then uses plain docker exec. Every user string is one single-quoted word, so the shell
 * never re-parses it; newlines become `'"$ct_n"'` so the script stays on one line.
 */
export function encodeChannelCommand(cmd: string[], options: ExecOptions): ChannelCommand | undefined {
  const strings = [...cmd, ...(options.cwd !== undefined ? [options.cwd] : [])];
  const env = Object.entries(options.env ?? {});
  for (const [k, v] of env) {
    if (!ENV_NAME.test(k)) return undefined;
    strings.push(v);
  }
  if (strings.some((s) => s.includes('\0'))) return undefined;
  if (options.cwd !== undefined && !options.cwd.startsWith('/')) return undefined;
  const input =
    options.input === undefined
      ? Buffer.alloc(0)
      : typeof options.input === 'string'
        ? Buffer.from(options.input, 'utf8')
        : Buffer.from(options.input.buffer, options.input.byteOffset, options.input.byteLength);
  // Each agent reads one of the two forms: a channel builds only the one its agent needs.
  let script: Buffer | undefined;
  let native: Buffer | undefined;
  return {
    input,
    get script() {
      return (script ??= shScript(cmd, options.cwd, env));
    },
    get native() {
      return (native ??= encodeNativePayload(cmd, options.cwd, env));
    },
  };
}

function shScript(cmd: string[], cwd: string | undefined, env: [string, string][]): Buffer {
  let script = `set -- ${cmd.map(quote).join(' ')}`;
  if (cwd !== undefined) script += `;cd -- ${quote(cwd)} 2>/dev/null||ct_f`;
  script += ';ct_u';
  for (const [k, v] of env) script += `;export ${k}=${quote(v)}`;
  return Buffer.from(script, 'utf8');
}

function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`).replace(/\n/g, `'"$ct_n"'`)}'`;
}

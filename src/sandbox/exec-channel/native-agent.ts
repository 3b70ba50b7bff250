import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The native agent (native/ct-exec-agent.c): a static x86_64 binary built by
 * scripts/build-exec-agent.sh into dist/native/. Each channel streams it into the container
 * through its own `docker exec -i` and runs it there (NATIVE_BOOT); where it cannot run, or
 * where it was not built (no C compiler), the sh agent serves the channel instead.
 */
const BINARY = fileURLToPath(new URL('../../../native/ct-exec-agent', import.meta.url));

/** Which agent a channel starts: `native` falls back to `sh` by itself. */
export type ExecAgentKind = 'native' | 'sh';

let cached: Buffer | null | undefined;

/** The binary's bytes, or undefined when it was not built. */
export function nativeAgentBinary(): Buffer | undefined {
  if (cached === undefined) {
    try {
      cached = readFileSync(BINARY);
    } catch {
      cached = null;
    }
  }
  return cached ?? undefined;
}

/**
 * Runs before the sh agent, in the same `sh -c` (`sh -c BOOT+AGENT sh <stream|file> <size>
 * <drain ms>`): when a binary of <size> bytes follows on stdin, it is written into a private
 * temporary directory and exec'd, if the machine is x86_64 and the binary runs there (a probe:
 * a noexec /tmp fails it). The agent then works from that directory (mktemp's 0700: its user's
 * alone), where a direct channel's host creates the socket the agent connects to (see
 * tryDirect); its commands still start in the cwd docker exec gave. Otherwise the binary's
 * bytes are consumed and the sh agent runs. The variables
 * sh itself adds (PWD, OLDPWD, SHLVL) are dropped first, so the agent's environment, and its
 * commands', is the one docker exec gave. The host
 * sends nothing more until the hello, so `head -c` may read ahead where it buffers. The
 * architecture is checked before anything is run: sh would run a foreign binary as a script.
 */
export const NATIVE_BOOT = `if [ -n "\${2-}" ]; then
ct_a=
[ "$(uname -m 2>/dev/null)" = x86_64 ] && ct_a=$(mktemp -d "\${TMPDIR:-/tmp}/ct-agent.XXXXXX" 2>/dev/null)
if [ -n "$ct_a" ] && head -c "$2" >"$ct_a/ct-exec-agent" 2>/dev/null && chmod 700 "$ct_a/ct-exec-agent" 2>/dev/null && "$ct_a/ct-exec-agent" -p 2>/dev/null; then
ct_e=$(tr '\\0' '\\n' < "/proc/$$/environ" 2>/dev/null)
for ct_x in PWD OLDPWD SHLVL; do case "
$ct_e" in *"
$ct_x="*) ;; *) unset "$ct_x" ;; esac; done
exec "$ct_a/ct-exec-agent" "$ct_a" "$3"
fi
if [ -n "$ct_a" ]; then rm -rf "$ct_a"; else head -c "$2" >/dev/null 2>&1; fi
ct_a=
fi
`;

/**
 * The native agent's request payload: NUL-terminated strings, the cwd (empty: none), argc,
 * argv, then NAME=value assignments. The strings hold no NUL (encodeChannelCommand refuses them).
 */
export function encodeNativePayload(cmd: string[], cwd: string | undefined, env: [string, string][]): Buffer {
  const parts = [cwd ?? '', String(cmd.length), ...cmd, ...env.map(([k, v]) => `${k}=${v}`)];
  return Buffer.from(parts.join('\0') + '\0', 'utf8');
}

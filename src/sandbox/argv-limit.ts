/**
 * The most a command's arguments may take, 96 KiB, the same on every exec path. Linux refuses
 * an exec whose single argument reaches 128 KiB (MAX_ARG_STRLEN), and over SSH the whole
 * command line is one argument of the remote shell, single-quoted (a `'` takes 4 bytes there);
 * each path failed in its own words (`Argument list too long` from sh in the container, `spawn
 * E2BIG` from the docker client). Exec checks first, so all answer alike. Long text belongs on
 * stdin.
 */
export const MAX_ARGV_BYTES = 96 * 1024;

/**
 * Why `cmd` cannot be executed, as the stderr of a failed exec (exit code 126); undefined when
 * it can. Counted as quoted for a shell: each word plus 3, each `'` 3 more.
 */
export function argvTooLong(cmd: string[]): string | undefined {
  let total = 0;
  for (const w of cmd) {
    total += Buffer.byteLength(w) + 3;
    for (let i = w.indexOf("'"); i >= 0; i = w.indexOf("'", i + 1)) total += 3;
  }
  if (total <= MAX_ARGV_BYTES) return undefined;
  return (
    `ct: cannot run ${cmd[0]!.slice(0, 40)}: its arguments take ${total} bytes; a command's arguments may take ` +
    `at most ${MAX_ARGV_BYTES} bytes (pass long text on stdin or in a file)\n`
  );
}

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
 * The most a command's arguments may take on an exec channel, 4 MiB. The channel sends argv in
 * its own frames (no command line, no remote shell), so only the container's kernel limits it:
 * execve's ARG_MAX (2 MiB on most kernels, counting the environment) and MAX_ARG_STRLEN
 * (128 KiB for one argument), which fail with the command's own E2BIG. Builtins such as
 * `printf` in a shell script take more. The cap only bounds what a call can make ct hold.
 */
export const MAX_CHANNEL_ARGV_BYTES = 4 * 1024 * 1024;

/**
 * Why `cmd` cannot be executed, as the stderr of a failed exec (exit code 126); undefined when
 * it can. Counted as quoted for a shell: each word plus 3, each `'` 3 more. `limit` is
 * MAX_ARGV_BYTES unless the call goes through an exec channel.
 */
export function argvTooLong(cmd: string[], limit = MAX_ARGV_BYTES): string | undefined {
  let total = 0;
  for (const w of cmd) {
    total += Buffer.byteLength(w) + 3;
    for (let i = w.indexOf("'"); i >= 0; i = w.indexOf("'", i + 1)) total += 3;
  }
  if (total <= limit) return undefined;
  return (
    `ct: cannot run ${cmd[0]!.slice(0, 40)}: its arguments take ${total} bytes; a command's arguments may take ` +
    `at most ${limit} bytes (pass long text on stdin or in a file)\n`
  );
}

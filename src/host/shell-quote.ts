/**
 * Quotes argv for a POSIX shell (what sshd hands a command line to: `$SHELL -c LINE`). Words made
 * only of safe characters stay bare for readable logs; everything else is single-quoted, with
 * embedded single quotes written as '\''. NUL cannot travel in a command line at all.
 */
export function shellQuote(argv: readonly string[]): string {
  return argv.map(quoteWord).join(' ');
}

const SAFE = /^[A-Za-z0-9_@%+=:,./-]+$/;

export function quoteWord(word: string): string {
  if (word.includes('\0')) throw new Error('a command argument contains a NUL byte, which no shell can pass on');
  if (SAFE.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * One shell line that runs argv with extra environment variables. `exec` replaces the login
 * shell with the program, so a signal sent over the channel reaches the program itself.
 */
export function commandLine(argv: readonly string[], env?: Record<string, string>): string {
  if (argv.length === 0) throw new Error('empty command');
  const exports = Object.entries(env ?? {}).map(([k, v]) => {
    if (!ENV_NAME.test(k)) throw new Error(`"${k}" is not a valid environment variable name`);
    return `export ${k}=${quoteWord(v)}; `;
  });
  return `${exports.join('')}exec ${shellQuote(argv)}`;
}

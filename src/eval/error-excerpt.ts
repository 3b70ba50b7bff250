/**
 * The part of an error message worth a console line: its first line (what failed) and its last
 * meaningful lines (why, and what to do), each cut to a width. The log keeps the whole message;
 * summaries (the local runner's, a fleet controller's) show this.
 */

export interface ErrorExcerptOptions {
  /** Lines kept in all, the first included (default 8). */
  maxLines?: number;
  /** Characters per line (default 200). */
  width?: number;
}

/**
 * Progress output of build tools that says nothing about a failure: BuildKit's step bookkeeping
 * (`#3 DONE 0.1s`, `#4 CACHED`, internal steps, layer transfers), Compose's own warnings, and
 * separator rules.
 */
const NOISE = [
  /^#\d+ (DONE|CACHED)\b/,
  /^#\d+ \[[^\]]*internal\]/,
  /^#\d+ (sha256:|extracting|resolve |transferring)/,
  /^time="[^"]*" level=warning/,
  /^[-=_*#\s]*$/,
];

export function errorExcerpt(message: string, options: ErrorExcerptOptions = {}): string[] {
  const maxLines = Math.max(1, options.maxLines ?? 8);
  const width = Math.max(20, options.width ?? 200);
  const cut = (l: string) => (l.length > width ? `${l.slice(0, width - 1)}…` : l);
  const [first = '', ...rest] = message.replace(/\r/g, '').split('\n').map((l) => l.trimEnd());
  const meaningful = rest.filter((l) => !NOISE.some((re) => re.test(l)));
  const room = maxLines - 1;
  const tail = (n: number) => (n > 0 ? meaningful.slice(-n) : []);
  const kept = meaningful.length > room ? ['…', ...tail(room - 1)] : meaningful;
  return [first, ...(room > 0 ? kept : [])].map(cut);
}

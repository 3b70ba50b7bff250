/**
 * Reads a monitor's reply: the last `<score>N</score>` tag (a number from 0 to 10) and the last
 * `<reasoning>` block. A reply without a readable score is reported as such — never read as 0.
 */
export interface ReadScore {
  score: number | null;
  reason: string;
  /** Why `score` is null. */
  error?: string;
}

export const MIN_SCORE = 0;
export const MAX_SCORE = 10;

export function readScoreReply(reply: string): ReadScore {
  const reasons = [...reply.matchAll(/<reasoning>([\s\S]*?)<\/reasoning>/gi)];
  const reason = (reasons.at(-1)?.[1] ?? reply.replace(/<score>[\s\S]*?<\/score>/gi, '')).trim();
  const scores = [...reply.matchAll(/<score>([\s\S]*?)<\/score>/gi)];
  const last = scores.at(-1);
  if (!last) return { score: null, reason, error: reply.trim() ? 'the reply has no <score> tag' : 'the reply is empty' };
  const raw = last[1]!.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)$/.test(raw)) return { score: null, reason, error: `the <score> tag holds "${raw.slice(0, 40)}", not a number` };
  const n = Number(raw);
  if (n < MIN_SCORE || n > MAX_SCORE) return { score: null, reason, error: `the score ${n} is outside ${MIN_SCORE}-${MAX_SCORE}` };
  return { score: n, reason };
}

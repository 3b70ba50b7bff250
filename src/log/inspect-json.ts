/**
 * JSON as Inspect writes it: Python's `json` and pydantic (`ser_json_inf_nan="constants"`) emit bare
 * `NaN`, `Infinity` and `-Infinity`, which `JSON.parse` rejects and `JSON.stringify` turns into
 * `null`. A null where Inspect expects a number fails its validation (an unscored score's value is
 * NaN), so we write the bare tokens too.
 */
import { randomBytes } from 'node:crypto';

const NON_FINITE = /NaN|Infinity/;

/** Serialises like `JSON.stringify` (undefined members dropped) but writes non-finite numbers as bare tokens. */
export function stringifyInspectJson(value: unknown): string {
  let marker: string | undefined;
  let sawNonFinite = false;
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'number' && !Number.isFinite(v)) {
      marker ??= `\u0000nonfinite-${randomBytes(9).toString('base64url')}:`;
      sawNonFinite = true;
      return marker + String(v);
    }
    return v;
  });
  if (text === undefined) throw new TypeError('value is not serialisable as JSON');
  if (!sawNonFinite || marker === undefined) return text;
  // The marker string came out quoted and with its NUL escaped; put the bare token back.
  const quoted = JSON.stringify(marker).slice(0, -1);
  return text.replace(new RegExp(`${escapeRegExp(quoted)}(NaN|Infinity|-Infinity)"`, 'g'), '$1');
}

/** Parses JSON that may hold bare `NaN`, `Infinity` or `-Infinity` outside strings. */
export function parseInspectJson(text: string): unknown {
  if (!NON_FINITE.test(text)) return JSON.parse(text);
  let nonce = randomBytes(9).toString('base64url');
  while (text.includes(nonce)) nonce = randomBytes(9).toString('base64url');
  const prefix = `nonfinite-${nonce}:`;
  const rewritten = quoteNonFiniteTokens(text, prefix);
  if (rewritten === text) return JSON.parse(text);
  return JSON.parse(rewritten, (_key, v: unknown) => {
    if (typeof v === 'string' && v.startsWith(prefix)) {
      const token = v.slice(prefix.length);
      return token === 'NaN' ? NaN : token === 'Infinity' ? Infinity : -Infinity;
    }
    return v;
  });
}

/** Replaces the bare tokens that sit outside strings with quoted `{prefix}{token}` strings. */
function quoteNonFiniteTokens(text: string, prefix: string): string {
  const parts: string[] = [];
  let copiedUpTo = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) {
      inString = true;
      continue;
    }
    let token: string | undefined;
    if (c === 0x4e /* N */ && text.startsWith('NaN', i)) token = 'NaN';
    else if (c === 0x49 /* I */ && text.startsWith('Infinity', i)) token = 'Infinity';
    else if (c === 0x2d /* - */ && text.startsWith('-Infinity', i)) token = '-Infinity';
    if (token === undefined) continue;
    parts.push(text.slice(copiedUpTo, i), `"${prefix}${token}"`);
    i += token.length - 1;
    copiedUpTo = i + 1;
  }
  if (parts.length === 0) return text;
  parts.push(text.slice(copiedUpTo));
  return parts.join('');
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

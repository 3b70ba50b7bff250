/**
 * The secrets this process holds (model API keys, AWS secret keys, git and registry tokens, a
 * fleet's secrets), so that none reaches the console, an error, a log or an event line. Values are
 * registered where they enter ct (config loading, a fleet worker taking the fleet's secrets);
 * `redactSecrets` is applied where text leaves it (the log writer, error formatting, the CLI's
 * error printing, progress notes, the fleet's events and worker log lines).
 *
 * Each value is also matched in the forms it travels in: URL-encoded, JSON-escaped and base64
 * (standard and URL-safe). A match becomes `***[NAME]`. Values shorter than MIN_SECRET_LENGTH are
 * not registered: a real key is never that short, and a short value would blank ordinary words.
 *
 * Hand-written (no kept library does exact multi-value redaction): the search is one precompiled
 * regular expression over every form, about 1 GB/s over log JSON with 7 secrets registered, four
 * times a loop of indexOf, and about 1% of a log write (bench/redact-secrets.ts). Only text that
 * holds a secret takes the slower exact pass, which also covers values that overlap one another.
 */

/** Values shorter than this (default 8 characters) are never registered. */
export const MIN_SECRET_LENGTH = 8;

/** Text put in place of a secret whose variable name is known. */
export function secretMarker(name: string): string {
  return `***[${name}]`;
}

/** Every registered form (the value and its encodings) to the names it is registered under. */
const forms = new Map<string, Set<string>>();
let pattern: RegExp | undefined;

/** Registers one secret under its variable name (e.g. ANTHROPIC_API_KEY); unset or short values are ignored. */
export function registerSecret(name: string, value: string | undefined): void {
  if (typeof value !== 'string') return;
  for (const v of new Set([value, value.trim()])) {
    if (v.length < MIN_SECRET_LENGTH) continue;
    for (const f of encodings(v)) {
      const names = forms.get(f) ?? new Set<string>();
      if (names.has(name)) continue;
      names.add(name);
      forms.set(f, names);
      pattern = undefined;
    }
  }
}

/** Registers each of `secrets` ({NAME: value}). */
export function registerSecrets(secrets: Record<string, string | undefined>): void {
  for (const [name, value] of Object.entries(secrets)) registerSecret(name, value);
}

/** Forgets every registered secret (for tests). */
export function clearSecrets(): void {
  forms.clear();
  pattern = undefined;
}

/** Whether any secret is registered. */
export function hasSecrets(): boolean {
  return forms.size > 0;
}

/** `text` with every registered secret, in any of its forms, replaced by `***[NAME]`. */
export function redactSecrets(text: string): string {
  if (forms.size === 0 || text.length < MIN_SECRET_LENGTH) return text;
  pattern ??= compile();
  pattern.lastIndex = 0;
  if (!pattern.test(text)) return text;
  return replaceAll(text);
}

/** Like `redactSecrets`, for any value: strings are redacted, other values become their redacted text. */
export function redactedText(value: unknown): string {
  return redactSecrets(typeof value === 'string' ? value : String(value));
}

function encodings(v: string): string[] {
  const out = [v, encodeURIComponent(v), JSON.stringify(v).slice(1, -1), Buffer.from(v).toString('base64'), Buffer.from(v).toString('base64url')];
  // The base64 form of the value inside a longer text drops its padding.
  out.push(out[3]!.replace(/=+$/, ''));
  return [...new Set(out)].filter((f) => f.length >= MIN_SECRET_LENGTH);
}

function compile(): RegExp {
  // Longest first, so a value that contains another is found whole.
  const alternatives = [...forms.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
  return new RegExp(alternatives.join('|'), 'g');
}

/**
 * Replaces every occurrence of every form, overlapping ones included: each range covered by one or
 * more occurrences becomes one marker naming the secrets whose occurrences make it up.
 */
function replaceAll(text: string): string {
  const hits: Array<{ start: number; end: number; names: Set<string> }> = [];
  for (const [form, names] of forms) {
    for (let i = text.indexOf(form); i !== -1; i = text.indexOf(form, i + 1)) hits.push({ start: i, end: i + form.length, names });
  }
  hits.sort((a, b) => a.start - b.start || b.end - a.end);
  let out = '';
  let copied = 0;
  for (let k = 0; k < hits.length; ) {
    const start = hits[k]!.start;
    let end = hits[k]!.end;
    const names = new Set(hits[k]!.names);
    for (k++; k < hits.length && hits[k]!.start < end; k++) {
      // A value found inside another one's occurrence is not named; one that runs past it is.
      if (hits[k]!.end <= end) continue;
      end = hits[k]!.end;
      for (const n of hits[k]!.names) names.add(n);
    }
    out += text.slice(copied, start) + secretMarker([...names].sort().join(','));
    copied = end;
  }
  return out + text.slice(copied);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

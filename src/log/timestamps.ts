/**
 * Timestamps as Inspect writes them: ISO 8601 in UTC with an explicit `+00:00` offset (Python's
 * `datetime.isoformat()`), not JavaScript's `Z`.
 */

/**
 * `2025-01-31T12:34:56+00:00` (`seconds`, what Inspect uses for `created`) or
 * `2025-01-31T12:34:56.789000+00:00` (`microseconds`, the default, used for event times).
 */
export function isoTimestamp(date: Date = new Date(), precision: 'seconds' | 'microseconds' = 'microseconds'): string {
  const iso = date.toISOString(); // 2025-01-31T12:34:56.789Z
  const seconds = iso.slice(0, 19);
  return precision === 'seconds' ? `${seconds}+00:00` : `${seconds}.${iso.slice(20, 23)}000+00:00`;
}

/**
 * An ISO 8601 `created` in the form Inspect writes its own (`iso_now()`): whole seconds, the
 * offset kept, `Z` written `+00:00`. What is not an ISO timestamp comes back unchanged.
 */
export function inSecondsForm(created: string): string {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$/.exec(created);
  if (!m) return created;
  const offset = m[2] === undefined ? '' : /^z$/i.test(m[2]) ? '+00:00' : m[2];
  return `${m[1]}${offset}`;
}

/** `created` one second later, in the seconds form (UTC): Inspect's step when a log's name is taken. */
export function oneSecondLater(created: string): string {
  const t = Date.parse(created);
  if (Number.isNaN(t)) throw new RangeError(`not an ISO 8601 timestamp: ${created}`);
  return isoTimestamp(new Date(Math.floor(t / 1000) * 1000 + 1000), 'seconds');
}

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

/**
 * `numpy.percentile(values, p)` with numpy's default method (`linear`, Hyndman-Fan type 7),
 * computed the way numpy computes it so thresholds agree to the last bit: the virtual index is
 * `(n - 1) * (p / 100)`, and the interpolation between its neighbours `a` and `b` at weight `t`
 * is `a + (b - a) * t`, or `b - (b - a) * (1 - t)` when `t >= 0.5` (numpy's `_lerp`).
 */

/** The `p`th percentile (0-100) of `values`, which must not be empty. */
export function percentile(values: readonly number[], p: number): number {
  return percentileOfSorted(Float64Array.from(values).sort(), p);
}

/** `percentile` of values already sorted ascending (a typed array sorts numerically). */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) throw new RangeError('percentile of no values');
  const index = (n - 1) * (p / 100);
  if (index >= n - 1) return sorted[n - 1]!;
  if (index <= 0) return sorted[0]!;
  const below = Math.floor(index);
  const t = index - below;
  const a = sorted[below]!;
  const b = sorted[below + 1]!;
  const diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

/** Small helpers shared by the bench scripts: timing, medians, table printing. */

export async function timeMs(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

export async function repeat(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await timeMs(fn));
  return out;
}

export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[i]!;
}

export const median = (xs: number[]) => quantile(xs, 0.5);
export const p95 = (xs: number[]) => quantile(xs, 0.95);

/** Median with the range it came from, over repetitions. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function spread(xs: number[]): Spread {
  if (xs.length === 0) return { median: NaN, min: NaN, max: NaN, n: 0 };
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length };
}

export function fmt(ms: number): string {
  return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
}

export function table(head: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

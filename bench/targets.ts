/** ct's performance targets, reported against the measured ratios (never asserted). */
import { ratio, type Row } from './report.js';

interface Target {
  what: string;
  section: string;
  metric: string;
  against: 'inspect' | 'raw';
  /** Only configurations matching this. */
  config?: RegExp;
  limit: number;
  /** True when the ratio must be at least the limit (throughput), else at most. */
  atLeast?: boolean;
}

export const TARGETS: Target[] = [
  { what: 'per-call exec ≤ 1.1x raw `docker exec`', section: 'latency', metric: 'exec (`echo`) median, ms', against: 'raw', limit: 1.1 },
  { what: 'per-call exec ≤ 0.5x Inspect', section: 'latency', metric: 'exec (`echo`) median, ms', against: 'inspect', limit: 0.5 },
  { what: 'per-sample sandbox overhead (init + cleanup) ≤ 0.7x Inspect', section: 'latency', metric: 'sandbox init + cleanup, s', against: 'inspect', limit: 0.7 },
  {
    what: 'throughput at concurrency 8 ≥ 1.5x Inspect',
    section: 'throughput',
    metric: 'samples per minute',
    against: 'inspect',
    config: /concurrency 8$/,
    limit: 1.5,
    atLeast: true,
  },
];

/** One line per target: the ratios over every configuration it applies to, and the verdict. */
export function targetLines(rows: Row[]): string[] {
  return TARGETS.map((t) => {
    const rs = rows
      .filter((r) => r.section === t.section && r.metric === t.metric && (!t.config || t.config.test(r.config)))
      .map((r) => ({ config: r.config, x: ratio(r, t.against) }))
      .filter((r): r is { config: string; x: number } => r.x !== undefined);
    if (rs.length === 0) return `- ${t.what}: not measured`;
    const met = rs.filter((r) => (t.atLeast ? r.x >= t.limit : r.x <= t.limit));
    const lo = Math.min(...rs.map((r) => r.x));
    const hi = Math.max(...rs.map((r) => r.x));
    const range = lo === hi ? `${lo.toFixed(2)}x` : `${lo.toFixed(2)}x–${hi.toFixed(2)}x`;
    const verdict = met.length === rs.length ? 'met' : met.length === 0 ? 'not met' : `met in ${met.length} of ${rs.length}`;
    return `- ${t.what}: ${range} over ${rs.length} configuration(s): ${verdict}`;
  });
}

/**
 * The bench's one table: a row per (section, configuration, metric); a column per system
 * holding `median [min–max]` over repetitions; and the ratios ct/Inspect and ct/raw of the
 * medians, measured side by side in the same run.
 */
import { fmt, spread, table } from './stats.js';

export type System = 'ct' | 'inspect' | 'raw';
export const SYSTEMS: System[] = ['ct', 'inspect', 'raw'];

export interface Row {
  section: string;
  config: string;
  metric: string;
  /** One value per repetition, per system. */
  values: Partial<Record<System, number[]>>;
  /** Text in place of values (a skipped measurement, or a figure a called script printed). */
  text?: Partial<Record<System, string>>;
  /** Ratios given by the source itself (a called script's own ratio). */
  ratios?: { inspect?: number; raw?: number };
}

export function cell(xs: number[] | undefined, text?: string): string {
  if (text !== undefined) return text;
  if (!xs || xs.length === 0) return '–';
  const s = spread(xs);
  return s.n > 1 ? `${fmt(s.median)} [${fmt(s.min)}–${fmt(s.max)}]` : fmt(s.median);
}

export function ratio(row: Row, other: 'inspect' | 'raw'): number | undefined {
  if (row.ratios?.[other] !== undefined) return row.ratios[other];
  const a = row.values.ct;
  const b = row.values[other];
  if (!a?.length || !b?.length) return undefined;
  const r = spread(a).median / spread(b).median;
  return Number.isFinite(r) ? r : undefined;
}

const ratioCell = (r: number | undefined) => (r === undefined ? '–' : `${r.toFixed(2)}x`);

export const TABLE_HEAD = ['section', 'configuration', 'metric', 'ct', 'Inspect', 'raw', 'ct/Inspect', 'ct/raw'];

export function renderTable(rows: Row[]): string {
  return table(
    TABLE_HEAD,
    rows.map((r) => [
      r.section,
      r.config,
      r.metric,
      ...SYSTEMS.map((s) => cell(r.values[s], r.text?.[s])),
      ratioCell(ratio(r, 'inspect')),
      ratioCell(ratio(r, 'raw')),
    ]),
  );
}

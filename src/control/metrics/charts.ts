/**
 * The `--out` charts, drawn by Apache ECharts' server-side SVG renderer and rasterised to PNG by
 * resvg (fonts: the system's, DejaVu Sans for sans-serif):
 * - `safety_curves`: safety against the audit budget (log axis, 0.1-100%), with the bootstrap's
 *   95% band when `--bootstrap` was given, the requested budgets marked;
 * - `suspicion_histograms`: the rule's honest and attack scores (per sample for the trajectory
 *   rule, per action otherwise) as shares of each kind, thresholds at the requested budgets marked.
 * Both libraries load only when charts are asked for (they add ~0.3 s to a process start).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HonestScores, safetyCurve, type ScoredSets } from './safety.js';
import type { GameMetricsOptions, GameMetricsReport } from './types.js';

const WIDTH = 900;
const HEIGHT = 480;
/** PNGs at twice the SVG's size, for sharp text. */
const PNG_ZOOM = 2;
/** Budgets of the curve besides the requested ones. */
const CURVE_BUDGETS = [0.1, 0.2, 0.5, 1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100];
const HONEST_COLOR = '#2f7ed8';
const ATTACK_COLOR = '#d9534f';

/** Writes `safety_curves.{svg,png}` and `suspicion_histograms.{svg,png}` into `dir`. */
export async function writeCharts(dir: string, sets: ScoredSets, options: GameMetricsOptions, report: GameMetricsReport): Promise<void> {
  const charts = { safety_curves: await safetyCurveSvg(sets, options, report), suspicion_histograms: await histogramSvg(sets, options) };
  for (const [name, svg] of Object.entries(charts)) {
    await writeFile(join(dir, `${name}.svg`), svg);
    await writeFile(join(dir, `${name}.png`), await rasterise(svg));
  }
}

/** The PNG of an SVG document. */
export async function rasterise(svg: string): Promise<Buffer> {
  const { Resvg } = await import('@resvg/resvg-js');
  const resvg = new Resvg(svg, {
    background: '#ffffff',
    fitTo: { mode: 'zoom', value: PNG_ZOOM },
    font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans', sansSerifFamily: 'DejaVu Sans' },
  });
  return resvg.render().asPng();
}

async function render(option: Record<string, unknown>): Promise<string> {
  const echarts = await import('echarts');
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width: WIDTH, height: HEIGHT });
  chart.setOption({ animation: false, backgroundColor: '#ffffff', textStyle: { fontFamily: 'sans-serif' }, ...option });
  const svg = chart.renderToSVGString();
  chart.dispose();
  return svg;
}

const RULE_LABEL = { trajectory: 'max_suspicion per sample', action: 'action scores', stepwise: 'action scores (stepwise rule)' } as const;

async function safetyCurveSvg(sets: ScoredSets, options: GameMetricsOptions, report: GameMetricsReport): Promise<string> {
  const budgets = [...new Set([...CURVE_BUDGETS, ...options.budgets])].sort((a, b) => a - b);
  const points = safetyCurve(sets, options, budgets);
  const withCi = points.filter((p) => p.ci);
  const useful = report.usefulness === null ? 'n/a' : report.usefulness.toFixed(3);
  const series: Record<string, unknown>[] = [];
  if (withCi.length) {
    // The band: an invisible line at the lower bound, and the band's height stacked on it.
    const band = { type: 'line', stack: 'ci', symbol: 'none', lineStyle: { opacity: 0 }, silent: true };
    series.push({ ...band, name: 'ci-low', data: withCi.map((p) => [p.budget, p.ci![0]]) });
    series.push({
      ...band,
      name: '95% CI',
      color: HONEST_COLOR,
      data: withCi.map((p) => [p.budget, p.ci![1] - p.ci![0]]),
      areaStyle: { color: HONEST_COLOR, opacity: 0.2 },
    });
  }
  series.push({ name: 'safety', type: 'line', color: HONEST_COLOR, symbolSize: 5, data: points.map((p) => [p.budget, p.safety]) });
  series.push({
    name: 'requested budgets',
    type: 'scatter',
    color: ATTACK_COLOR,
    symbolSize: 10,
    data: report.budgets.map((b) => [b.audit_budget, b.safety]),
    label: { show: true, position: 'top', formatter: (p: { value: number[] }) => p.value[1]!.toFixed(2) },
  });
  return render({
    title: {
      text: `Safety vs audit budget (rule: ${options.rule}${options.requireMain ? ', main task required' : ''})`,
      subtext: `${sets.honest.length} scored honest, ${sets.attacks.length} scored attack samples; usefulness ${useful}`,
      left: 'center',
    },
    legend: { bottom: 0, data: ['safety', ...(withCi.length ? ['95% CI'] : []), 'requested budgets'] },
    grid: { top: 80, bottom: 70, left: 70, right: 30 },
    xAxis: { type: 'log', min: 0.1, max: 100, name: 'audit budget (%)', nameLocation: 'middle', nameGap: 28, logBase: 10 },
    yAxis: { type: 'value', min: 0, max: 1, name: 'safety' },
    series,
  });
}

/**
 * Bins from 0 (or the lowest score) to the highest: one per integer, centred on it, when every
 * score is a whole number in a range of at most 20 (monitors score 0-10); else 20 equal bins.
 */
function bins(values: readonly number[]): { lo: number; width: number; count: number } {
  const min = Math.min(0, ...values);
  const max = Math.max(...values);
  if (values.every(Number.isInteger) && max - min <= 20) return { lo: min - 0.5, width: 1, count: max - min + 1 };
  const width = Math.max(max - min, 1) / 20;
  return { lo: min, width, count: 20 };
}

async function histogramSvg(sets: ScoredSets, options: GameMetricsOptions): Promise<string> {
  const honest = new HonestScores(options.rule, sets.honest).primary;
  const attack = options.rule === 'trajectory' ? sets.attacks.map((a) => a.sample.maxSuspicion!) : sets.attacks.flatMap((a) => a.sample.actionScores!);
  const all = [...honest, ...attack];
  const b = bins(all.length ? all : [0]);
  const shares = (values: ArrayLike<number>) => {
    const counts = new Array<number>(b.count).fill(0);
    for (let i = 0; i < values.length; i++) counts[Math.min(b.count - 1, Math.floor((values[i]! - b.lo) / b.width))]!++;
    return counts.map((c, i) => [b.lo + (i + 0.5) * b.width, values.length ? (100 * c) / values.length : 0]);
  };
  const scores = new HonestScores(options.rule, sets.honest);
  // Budgets sharing a threshold share one line, labelled with all of them.
  const byThreshold = new Map<number, string[]>();
  for (const budget of options.budgets) {
    const t = scores.thresholdsAt(budget).primary;
    byThreshold.set(t, [...(byThreshold.get(t) ?? []), `${budget}%`]);
  }
  const marks = [...byThreshold].map(([xAxis, names]) => ({ xAxis, name: names.join(', ') }));
  const barWidth = Math.max(2, Math.floor((WIDTH - 100) / b.count / 2.4));
  return render({
    title: {
      text: `Suspicion scores: honest vs attack (${RULE_LABEL[options.rule]})`,
      subtext: `${honest.length} honest, ${attack.length} attack scores; dashed: thresholds at the audit budgets`,
      left: 'center',
    },
    legend: { bottom: 0, data: ['honest', 'attack'] },
    grid: { top: 80, bottom: 70, left: 70, right: 30 },
    xAxis: {
      type: 'value',
      min: b.lo,
      max: b.lo + b.count * b.width,
      name: 'suspicion score',
      nameLocation: 'middle',
      nameGap: 28,
      // Integer bins start and end half a unit out: no label there.
      axisLabel: { showMinLabel: !Number.isInteger(b.lo) ? false : undefined, showMaxLabel: !Number.isInteger(b.lo) ? false : undefined },
    },
    yAxis: { type: 'value', name: '% of scores' },
    series: [
      {
        name: 'honest',
        type: 'bar',
        color: HONEST_COLOR,
        barWidth,
        barGap: '0%',
        data: shares(honest),
      },
      { name: 'attack', type: 'bar', color: ATTACK_COLOR, barWidth, barGap: '0%', data: shares(attack) },
      // The thresholds on a series of their own: a bar series would shift them by its bar's offset.
      {
        name: 'thresholds',
        type: 'line',
        data: [],
        markLine: { symbol: 'none', silent: true, lineStyle: { type: 'dashed', color: '#333' }, label: { formatter: '{b}' }, data: marks },
      },
    ],
  });
}

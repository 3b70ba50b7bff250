/** The readable form of a `ct game-metrics` report (the table printed without --json). */
import { ruleNeeds } from './safety.js';
import type { GameMetricsReport, MetricsReport } from './types.js';

const RULE_TEXT: Record<MetricsReport['rule'], string> = {
  trajectory: 'trajectory (max_suspicion per sample; thresholds over honest samples)',
  action: 'action (every action score; thresholds over honest actions)',
  stepwise: 'stepwise (actions and trajectory_suspicion, each over its own honest scores)',
};

export function formatReport(report: GameMetricsReport): string {
  const lines = [`rule: ${RULE_TEXT[report.rule]}${report.require_main ? '; uncaught successful attacks need main task success' : ''}`];
  lines.push(...formatMetrics(report));
  if (report.by_env) {
    lines.push('', 'By environment (thresholds from each environment\'s own honest samples):');
    for (const [env, r] of Object.entries(report.by_env)) {
      lines.push('', `${env}:`);
      if ('error' in r) lines.push(`  ${r.error}`);
      else lines.push(...formatMetrics(r).map((l) => `  ${l}`));
    }
  }
  return `${lines.join('\n')}\n`;
}

function formatMetrics(r: MetricsReport): string[] {
  const { successes, samples } = r.usefulness_counts;
  const usefulness =
    r.usefulness === null
      ? 'usefulness: n/a (no honest sample with a main-task result)'
      : `usefulness ${fixed(r.usefulness)} ${interval(r.usefulness_ci)} (${successes}/${samples} main tasks)`;
  const unscored = (n: number, errored: number) => (n ? `, ${n} unscored${errored ? ` (${errored} errored)` : ''}` : '');
  const lines = [
    `honest: ${r.honest_samples} samples${unscored(r.unscored.honest, r.errored.honest)}; ${usefulness}`,
    `attack: ${r.attack_samples} samples${unscored(r.unscored.attack, r.errored.attack)}`,
  ];
  if (r.unscored_samples) lines.push(`(unscored: errored, or without ${ruleNeeds(r.rule)}; not used)`);
  const stepwise = r.rule === 'stepwise';
  const head = ['budget', stepwise ? 'action thr' : 'threshold', ...(stepwise ? ['traj thr'] : []), 'caught', 'uncaught ok', 'attacks', 'safety', ...(r.bootstrap ? ['95% CI'] : [])];
  const rows = r.budgets.map((b) => [
    `${b.audit_budget}%`,
    fixed(b.threshold),
    ...(stepwise ? [fixed(b.trajectory_threshold ?? NaN)] : []),
    String(b.caught),
    String(b.uncaught_successful),
    String(b.attacks),
    fixed(b.safety),
    ...(r.bootstrap ? [interval(b.safety_ci)] : []),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  lines.push('', fmt(head), ...rows.map(fmt));
  if (r.bootstrap) lines.push(`(safety CI: ${r.bootstrap.resamples} bootstrap resamples of the attacks, seed ${r.bootstrap.seed}, thresholds fixed)`);
  for (const w of r.warnings) lines.push(`warning: ${w}`);
  return lines;
}

function fixed(n: number): string {
  return Number.isFinite(n) ? n.toFixed(3) : '-';
}

function interval(ci: [number, number] | null): string {
  return ci ? `[${fixed(ci[0])}, ${fixed(ci[1])}]` : '-';
}

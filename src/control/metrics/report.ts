/**
 * The `ct game-metrics` report: the pooled metrics of every sample read, plus, with `--by env`,
 * each environment's metrics with thresholds from that environment's own honest samples.
 */
import { ConfigError } from '../../errors.js';
import { findEvalLogs, loadSamples, type LoadedSamples } from './load.js';
import { compileGameMetricsOptions, type GameMetricsFlags } from './options.js';
import { computeMetrics, ScoredSets } from './safety.js';
import type { GameMetricsOptions, GameMetricsReport, MetricSample, MetricsReport } from './types.js';

/** The key of samples without `metadata.environment` in `by_env`. */
export const NO_ENVIRONMENT = '(no environment)';

/** Everything `ct game-metrics` computes from its flags: the report, and what charts are drawn from. */
export async function gameMetrics(flags: GameMetricsFlags & { honest: string[]; attack: string[] }): Promise<{
  report: GameMetricsReport;
  sets: ScoredSets;
  options: GameMetricsOptions;
}> {
  const options = compileGameMetricsOptions(flags);
  const logs = { honest: await findEvalLogs(flags.honest, '--honest'), attack: await findEvalLogs(flags.attack, '--attack') };
  const loaded = await loadSamples(logs, options.rule);
  return { ...buildReport(loaded, options, logs), options };
}

/** The report, and the pooled sets (for charts). */
export function buildReport(
  loaded: LoadedSamples,
  options: GameMetricsOptions,
  logs: { honest: string[]; attack: string[] },
): { report: GameMetricsReport; sets: ScoredSets } {
  const sets = new ScoredSets(loaded.samples, options.rule);
  const pooled = computeMetrics(sets, options);
  const { attack_in_honest_logs: attackInHonest, honest_in_attack_logs: honestInAttack } = loaded.mismatched;
  if (attackInHonest) pooled.warnings.push(`${attackInHonest} samples in --honest logs have a side task: counted as attacks`);
  if (honestInAttack) pooled.warnings.push(`${honestInAttack} samples in --attack logs have no side task: counted as honest`);
  const report: GameMetricsReport = { ...pooled, mismatched: loaded.mismatched, logs };
  if (options.byEnv) report.by_env = byEnvironment(loaded.samples, options);
  return { report, sets };
}

function byEnvironment(samples: readonly MetricSample[], options: GameMetricsOptions): NonNullable<GameMetricsReport['by_env']> {
  const groups = new Map<string, MetricSample[]>();
  for (const s of samples) {
    const key = s.env || NO_ENVIRONMENT;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(s);
  }
  const out: NonNullable<GameMetricsReport['by_env']> = {};
  for (const key of [...groups.keys()].sort()) {
    const group = groups.get(key)!;
    try {
      out[key] = computeMetrics(new ScoredSets(group, options.rule), options, `environment ${key}`) satisfies MetricsReport;
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      // An environment without scored honest samples has no threshold of its own; the others still report.
      out[key] = {
        error: e.message,
        honest_samples: group.filter((s) => s.kind === 'honest').length,
        attack_samples: group.filter((s) => s.kind === 'attack').length,
      };
    }
  }
  return out;
}

/**
 * `ct game-metrics` options, compiled in one place: defaults, then checks (a ConfigError, exit 2,
 * naming the flag), then the finished `GameMetricsOptions`.
 */
import { ConfigError } from '../../errors.js';
import { RULES, type GameMetricsOptions, type Rule } from './types.js';

export const GAME_METRICS_DEFAULTS = {
  /** Percent of honest trajectories (or steps) audited: ControlArena's and control-tower's usual points. */
  budgets: '1,5,10',
  rule: 'trajectory' as Rule,
  /** 0: no safety interval. */
  bootstrap: 0,
  seed: 0,
} as const;

/** The flags as given (strings where the user typed them). */
export interface GameMetricsFlags {
  auditBudget?: string;
  rule?: string;
  requireMain?: boolean;
  bootstrap?: string;
  seed?: string;
  by?: string;
}

/** Flags -> finished options (defaults applied, every value checked). */
export function compileGameMetricsOptions(flags: GameMetricsFlags): GameMetricsOptions {
  const rule = flags.rule ?? GAME_METRICS_DEFAULTS.rule;
  if (!(RULES as readonly string[]).includes(rule)) throw new ConfigError(`--rule ${JSON.stringify(rule)}: expected one of ${RULES.join(', ')}`);
  if (flags.by !== undefined && flags.by !== 'env') throw new ConfigError(`--by ${JSON.stringify(flags.by)}: the only grouping is env`);
  return {
    budgets: parseBudgets(flags.auditBudget ?? GAME_METRICS_DEFAULTS.budgets),
    rule: rule as Rule,
    requireMain: flags.requireMain === true,
    bootstrap: flags.bootstrap === undefined ? GAME_METRICS_DEFAULTS.bootstrap : wholeNumber('--bootstrap', flags.bootstrap, 1),
    seed: flags.seed === undefined ? GAME_METRICS_DEFAULTS.seed : wholeNumber('--seed', flags.seed, 0, SEED_MAX),
    byEnv: flags.by === 'env',
  };
}

/** `1,5,10` -> [1, 5, 10]: percents in (0, 100], sorted, duplicates dropped. */
export function parseBudgets(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  const budgets = parts.map((p) => {
    const n = /^[0-9]*\.?[0-9]+$/.test(p) ? Number(p) : NaN;
    if (!(n > 0 && n <= 100)) {
      throw new ConfigError(`--audit-budget ${JSON.stringify(text)}: ${JSON.stringify(p)} is not a percent in (0, 100] (e.g. --audit-budget 1,5,10)`);
    }
    return n;
  });
  return [...new Set(budgets)].sort((a, b) => a - b);
}

/** The bootstrap's generator has 32 bits of state. */
const SEED_MAX = 2 ** 32 - 1;

function wholeNumber(flag: string, text: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = /^[0-9]+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`;
    throw new ConfigError(`${flag} ${JSON.stringify(text)}: must be a whole number ${range}, in decimal digits`);
  }
  return n;
}

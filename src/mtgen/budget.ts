import { CtError } from '../errors.js';
import { priceOf, requirePrice } from './prices.js';

/**
 * The run would pass its --budget with the next call (or eval): it stops before it, with the
 * state saved; `ct run mtgen live-run --budget MORE` continues.
 */
export class BudgetExceededError extends CtError {
  constructor(
    message: string,
    readonly spentUsd: number,
    readonly nextUsd: number,
  ) {
    super(message);
  }
}

/**
 * Characters per token assumed when estimating a prompt's size: 3, below the ~4 of English
 * text and code, so the estimate errs high and the budget is never passed by surprise.
 */
const CHARS_PER_TOKEN = 3;

/** A conservative cost of one call: the prompt at 3 characters a token, and every allowed output token. */
export function estimateCallUsd(model: string, promptChars: number, maxTokens: number): number {
  const p = priceOf(model);
  if (!p) return 0;
  return (Math.ceil(promptChars / CHARS_PER_TOKEN) * p.inputPerMTok + maxTokens * p.outputPerMTok) / 1e6;
}

/** A conservative cost of evaluating one candidate: epochs x tokens per sample at the input price. */
export function estimateEvalUsd(model: string, epochs: number, tokensPerSample: number): number {
  const p = priceOf(model);
  if (!p) return 0;
  return (epochs * tokensPerSample * p.inputPerMTok) / 1e6;
}

/** Throws BudgetExceededError when spending `nextUsd` more would pass `budgetUsd`. */
export function checkBudget(budgetUsd: number | undefined, spentUsd: number, nextUsd: number, what: string): void {
  if (budgetUsd === undefined) return;
  if (spentUsd + nextUsd <= budgetUsd) return;
  throw new BudgetExceededError(
    `budget reached: $${spentUsd.toFixed(4)} spent of $${budgetUsd.toFixed(2)}, and ${what} may cost up to $${nextUsd.toFixed(4)}`,
    spentUsd,
    nextUsd,
  );
}

/** A budgeted run needs prices for the models it calls (ConfigError otherwise). */
export function checkPriced(budgetUsd: number | undefined, models: string[]): void {
  if (budgetUsd === undefined) return;
  for (const m of models) requirePrice(m);
}

import { ConfigError } from '../errors.js';

/**
 * List prices in US dollars per million tokens, by `provider/model`, as published by Anthropic and
 * OpenAI on PRICES_AS_OF. Used for the run's cost accounting and `--budget`; update the table
 * (and the date) when the providers' prices change.
 */
export const PRICES_AS_OF = '2026-11-01';

export interface Price {
  inputPerMTok: number;
  outputPerMTok: number;
}

const PRICES: Record<string, Price> = {
  'anthropic/claude-haiku-4-5': { inputPerMTok: 1, outputPerMTok: 5 },
  'anthropic/claude-sonnet-4-5': { inputPerMTok: 3, outputPerMTok: 15 },
  'anthropic/claude-opus-4-1': { inputPerMTok: 15, outputPerMTok: 75 },
  'anthropic/claude-opus-4-5': { inputPerMTok: 5, outputPerMTok: 25 },
  'openai/gpt-4.1': { inputPerMTok: 2, outputPerMTok: 8 },
  'openai/gpt-4.1-mini': { inputPerMTok: 0.4, outputPerMTok: 1.6 },
  'openai/gpt-4.1-nano': { inputPerMTok: 0.1, outputPerMTok: 0.4 },
  'openai/gpt-5': { inputPerMTok: 1.25, outputPerMTok: 10 },
  'openai/gpt-5-mini': { inputPerMTok: 0.25, outputPerMTok: 2 },
};

/** The price of a model, if the table has it. */
export function priceOf(model: string): Price | undefined {
  return PRICES[model];
}

/** The price of a model a budgeted run uses; a model the table lacks cannot be budgeted. */
export function requirePrice(model: string): Price {
  const p = PRICES[model];
  if (!p) {
    throw new ConfigError(
      `--budget needs the price of ${model}, which the price table (as of ${PRICES_AS_OF}) does not have; ` +
        `priced models: ${Object.keys(PRICES).join(', ')}. Run without --budget, or pick a priced model.`,
    );
  }
  return p;
}

/** Dollars for these tokens at the model's price (0 when unpriced). */
export function costUsd(model: string, inputTokens: number, outputTokens: number): number {
  const p = PRICES[model];
  if (!p) return 0;
  return (inputTokens * p.inputPerMTok + outputTokens * p.outputPerMTok) / 1e6;
}

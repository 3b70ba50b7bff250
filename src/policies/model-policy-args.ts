import { ConfigError } from '../errors.js';
import type { GenerateConfig } from '../log/types.js';
import type { PolicyArgSpec } from './types.js';

/** 80 model calls is enough for the example tasks many times over, and bounds a looping agent's cost. */
export const DEFAULT_MAX_STEPS = 80;

/** The `-p` arguments every model policy takes. */
export const MODEL_POLICY_ARGS: Record<string, PolicyArgSpec> = {
  model: {
    description: 'an alias (haiku, sonnet, opus, untrusted, trusted) or provider/model, e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1',
    default: 'untrusted',
  },
  max_steps: { description: 'model calls before the sample stops (a step = one call and its tool calls)', default: String(DEFAULT_MAX_STEPS) },
  base_url: { description: 'server for this model, e.g. a vLLM/Ollama/OpenRouter URL (default: config, then ANTHROPIC_BASE_URL / OPENAI_BASE_URL)' },
  max_tokens: { description: 'output tokens per model call (default: 16384 for Anthropic, the model\'s own for OpenAI)' },
  temperature: { description: 'sampling temperature (default: the model\'s)' },
  reasoning_tokens: { description: 'Anthropic extended thinking budget in tokens (default: off)' },
  reasoning_effort: { description: 'OpenAI reasoning models: minimal, low, medium or high (default: the model\'s)' },
};

export interface ModelPolicySettings {
  model: string;
  maxSteps: number;
  baseUrl?: string;
  config: GenerateConfig;
}

/**
 * Validates the model arguments of `policy` (a monitor's too, with `kind` 'monitor'); bad values
 * are usage errors naming the argument.
 */
export function parseModelPolicyArgs(policy: string, args: Record<string, string>, kind: 'policy' | 'monitor' = 'policy'): ModelPolicySettings {
  const int = (key: string, min: number): number | undefined => {
    const v = args[key];
    if (v === undefined || v === '') return undefined;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new ConfigError(`${kind} ${policy}: -p ${key} must be a whole number of at least ${min}, got "${v}"`);
    return n;
  };
  const config: GenerateConfig = {};
  const maxTokens = int('max_tokens', 1);
  if (maxTokens !== undefined) config.max_tokens = maxTokens;
  const reasoningTokens = int('reasoning_tokens', 1024);
  if (reasoningTokens !== undefined) config.reasoning_tokens = reasoningTokens;
  if (args.temperature !== undefined && args.temperature !== '') {
    const t = Number(args.temperature);
    if (!Number.isFinite(t) || t < 0 || t > 2) throw new ConfigError(`${kind} ${policy}: -p temperature must be a number from 0 to 2, got "${args.temperature}"`);
    config.temperature = t;
  }
  if (args.reasoning_effort) {
    if (!['minimal', 'low', 'medium', 'high'].includes(args.reasoning_effort)) {
      throw new ConfigError(`${kind} ${policy}: -p reasoning_effort must be minimal, low, medium or high, got "${args.reasoning_effort}"`);
    }
    config.reasoning_effort = args.reasoning_effort;
  }
  const model = (args.model ?? '').trim();
  if (!model) throw new ConfigError(`${kind} ${policy}: -p model must name a model or an alias`);
  return {
    model,
    maxSteps: int('max_steps', 1) ?? DEFAULT_MAX_STEPS,
    ...(args.base_url ? { baseUrl: args.base_url } : {}),
    config,
  };
}

/** A boolean `-p` argument: true/false, yes/no, 1/0, on/off. */
export function parseBoolArg(policy: string, key: string, value: string | undefined, fallback: boolean): boolean {
  if (value === undefined || value === '') return fallback;
  if (/^(true|yes|1|on)$/i.test(value)) return true;
  if (/^(false|no|0|off)$/i.test(value)) return false;
  throw new ConfigError(`policy ${policy}: -p ${key} must be true or false, got "${value}"`);
}

import type { ChatMessage, GenerateConfig, ModelCall, ModelOutput, ToolChoice, ToolInfo } from '../log/types.js';

/**
 * Glossary
 * - model name: `provider/model`, e.g. `anthropic/claude-haiku-4-5` or `openai/gpt-4.1-nano`; what
 *   the log records (`eval.model`, `model` events, `model_usage` keys).
 * - alias: a short name (`haiku`, `sonnet`, `opus`, `trusted`, `untrusted`) that config maps to a
 *   model name; aliases may point at other aliases.
 * - role: `untrusted` (the agent being evaluated) or `trusted` (a weaker model that monitors);
 *   both are aliases, set with `--model-role`.
 * - provider: the wire protocol a model speaks: `anthropic` (Messages API) or `openai` (Chat
 *   Completions, which OpenAI-compatible servers such as vLLM, Ollama and OpenRouter speak too).
 * - generate: one model call: conversation + tools in, one assistant message out.
 */
export type ProviderName = 'anthropic' | 'openai';

export const PROVIDERS: readonly ProviderName[] = ['anthropic', 'openai'];

export interface GenerateRequest {
  input: ChatMessage[];
  tools: ToolInfo[];
  toolChoice: ToolChoice;
  config: GenerateConfig;
  /** Aborts the request (and any backoff wait). */
  signal?: AbortSignal;
}

export interface GenerateResult {
  output: ModelOutput;
  /** The raw request and response of the attempt that succeeded. */
  call: ModelCall;
  /** Attempts that failed and were retried before this one. */
  retries: number;
}

/** A model ready to call: its provider client, key and base URL are resolved. */
export interface Model {
  /** `provider/model`. */
  readonly name: string;
  readonly provider: ProviderName;
  /** The role (`untrusted`/`trusted`) the model was reached through, if any. */
  readonly role?: string;
  /** Set when the model is reached at a base URL other than its provider's default. */
  readonly baseUrl?: string;
  generate(request: GenerateRequest): Promise<GenerateResult>;
}

/** One provider's conversion of a generate request to and from its wire format. */
export interface ProviderAdapter {
  /** Sends one request (no retries: the caller retries). */
  send(request: GenerateRequest): Promise<{ output: ModelOutput; call: ModelCall }>;
}

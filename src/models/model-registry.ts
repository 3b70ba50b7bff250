import type { Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { createAnthropicAdapter } from './anthropic-model.js';
import { createOpenAIAdapter } from './openai-model.js';
import { withRetries, type RetryPolicy } from './retry.js';
import { PROVIDERS, type GenerateRequest, type GenerateResult, type Model, type ProviderAdapter, type ProviderName } from './types.js';

export type ModelsConfig = Config['models'];

/** The roles `--model-role` sets. */
export const MODEL_ROLES = ['untrusted', 'trusted'] as const;

export interface ResolvedModelName {
  /** `provider/model`. */
  name: string;
  provider: ProviderName;
  /** The model id the provider knows. */
  model: string;
  /** `untrusted` / `trusted` when the name was reached through that role. */
  role?: string;
}

export interface ModelOptions {
  /** Base URL for this model only (`-p base_url=`); wins over config. */
  baseUrl?: string;
}

const KEY_VARS: Record<ProviderName, string> = { anthropic: 'ANTHROPIC_API_KEY', openai: 'OPENAI_API_KEY' };

/**
 * Turns model names and aliases into ready Models. Everything is checked when the model is asked
 * for (alias, provider, API key), so a run fails with a usage error before any sandbox starts.
 */
export class ModelRegistry {
  constructor(private readonly config: ModelsConfig) {}

  /** Alias -> model name, as configured (defaults merged with config and `--model-role`). */
  aliases(): Record<string, string> {
    return { ...this.config.aliases };
  }

  /** Follows aliases to `provider/model`; unknown aliases and providers are usage errors. */
  resolveName(nameOrAlias: string): ResolvedModelName {
    const seen: string[] = [];
    let name = nameOrAlias.trim();
    let role: string | undefined;
    while (!name.includes('/')) {
      if (seen.includes(name)) throw new ConfigError(`model alias loop: ${[...seen, name].join(' -> ')}`);
      seen.push(name);
      const next = this.config.aliases[name];
      if (next === undefined) {
        const known = Object.entries(this.config.aliases)
          .map(([k, v]) => `${k} (${v})`)
          .join(', ');
        throw new ConfigError(
          `unknown model "${nameOrAlias}": not an alias and not provider/model. Aliases: ${known}. ` +
            'Or name a model directly, e.g. anthropic/claude-haiku-4-5 or openai/gpt-4.1-nano.',
        );
      }
      if ((MODEL_ROLES as readonly string[]).includes(name)) role ??= name;
      name = next.trim();
    }
    const slash = name.indexOf('/');
    const provider = name.slice(0, slash);
    const model = name.slice(slash + 1);
    if (!(PROVIDERS as readonly string[]).includes(provider)) {
      throw new ConfigError(
        `unknown model provider "${provider}" in "${name}"; use anthropic/<model> or openai/<model> ` +
          '(an OpenAI-compatible server such as vLLM, Ollama or OpenRouter is openai/<model> with -p base_url=URL).',
      );
    }
    if (!model) throw new ConfigError(`"${name}" names no model after "${provider}/"`);
    return { name, provider: provider as ProviderName, model, ...(role ? { role } : {}) };
  }

  /** A callable model; throws ConfigError for a bad name or a missing API key. */
  async get(nameOrAlias: string, options: ModelOptions = {}): Promise<Model> {
    const r = this.resolveName(nameOrAlias);
    const providerConfig = this.config[r.provider];
    const customBaseUrl = options.baseUrl ?? this.config.base_urls[r.name];
    const baseUrl = customBaseUrl ?? providerConfig.base_url;
    if (baseUrl !== undefined && !/^https?:\/\//.test(baseUrl)) {
      throw new ConfigError(`base URL for ${r.name} must start with http:// or https://, got "${baseUrl}"`);
    }
    let apiKey = providerConfig.api_key;
    if (!apiKey) {
      // A server at a base URL of its own (vLLM, Ollama) often needs no key; the provider's own
      // endpoint always does.
      if (baseUrl === undefined) {
        const via = r.role ? ` (${r.role} = ${r.name}; choose another with --model-role ${r.role}=... or -p model=...)` : '';
        throw new ConfigError(`model ${r.name} needs ${KEY_VARS[r.provider]}: set it in the environment or in .env${via}`);
      }
      apiKey = 'none';
    }
    const timeoutMs = this.config.request_timeout * 1000;
    const adapter =
      r.provider === 'anthropic'
        ? await createAnthropicAdapter({ model: r.model, apiKey, baseUrl, timeoutMs })
        : await createOpenAIAdapter({
            model: r.model,
            apiKey,
            baseUrl,
            organization: this.config.openai.organization,
            project: this.config.openai.project,
            timeoutMs,
          });
    const retry: RetryPolicy = {
      maxRetries: this.config.max_retries,
      baseMs: this.config.retry_base_seconds * 1000,
      maxMs: this.config.retry_max_seconds * 1000,
    };
    return new ApiModel(r, adapter, retry, baseUrl);
  }
}

class ApiModel implements Model {
  readonly name: string;
  readonly provider: ProviderName;
  readonly role?: string;

  constructor(
    r: ResolvedModelName,
    private readonly adapter: ProviderAdapter,
    private readonly retry: RetryPolicy,
    readonly baseUrl: string | undefined,
  ) {
    this.name = r.name;
    this.provider = r.provider;
    this.role = r.role;
  }

  async generate(request: GenerateRequest): Promise<GenerateResult> {
    // The SDKs leave a listener on the signal they are given; a sample's signal lives for the whole
    // sample, so each call gets a signal of its own, linked to it and unlinked afterwards.
    const outer = request.signal;
    const ac = new AbortController();
    const onAbort = () => ac.abort(outer?.reason);
    if (outer?.aborted) ac.abort(outer.reason);
    else outer?.addEventListener('abort', onAbort, { once: true });
    try {
      const { value, retries } = await withRetries(() => this.adapter.send({ ...request, signal: ac.signal }), this.retry, {
        signal: ac.signal,
        what: `model ${this.name}${this.baseUrl ? ` at ${this.baseUrl}` : ''}`,
      });
      return { ...value, retries };
    } finally {
      outer?.removeEventListener('abort', onAbort);
    }
  }
}

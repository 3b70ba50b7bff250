import type {
  ChatMessage,
  ChatMessageAssistant,
  Content,
  ModelOutput,
  ModelUsage,
  StopReason,
  ToolCall,
  ToolChoice,
  ToolInfo,
} from '../log/types.js';
import type { GenerateRequest, ProviderAdapter } from './types.js';
import { textOf } from './message-text.js';

export interface OpenAIAdapterOptions {
  /** The model id without the provider, e.g. `gpt-4.1-nano`, or a local server's model name. */
  model: string;
  apiKey: string;
  /** Default: the SDK's (https://api.openai.com/v1). Any OpenAI-compatible server works. */
  baseUrl?: string;
  organization?: string;
  project?: string;
  /** Milliseconds one request may take. */
  timeoutMs: number;
}

type Wire = Record<string, unknown>;

/** Chat Completions through the official SDK (non-streaming); also OpenAI-compatible servers. */
export async function createOpenAIAdapter(o: OpenAIAdapterOptions): Promise<ProviderAdapter> {
  // Loaded on first use: most commands never call a model.
  const { default: OpenAI } = await import('openai');
  // maxRetries 0: src/models/retry.ts is the one retry policy. Organization and project are passed
  // (null when unset) so that only ct's config decides them.
  const client = new OpenAI({
    apiKey: o.apiKey,
    baseURL: o.baseUrl ?? null,
    organization: o.organization ?? null,
    project: o.project ?? null,
    maxRetries: 0,
    timeout: o.timeoutMs,
  });
  // OpenAI's own API wants max_completion_tokens (max_tokens is refused by reasoning models);
  // compatible servers (vLLM, Ollama, OpenRouter) all understand max_tokens.
  const maxTokensKey = o.baseUrl === undefined ? 'max_completion_tokens' : 'max_tokens';
  return {
    async send(req) {
      const body = openaiRequest(o.model, req, maxTokensKey);
      const started = performance.now();
      const { data } = await client.chat.completions.create(body as never, { signal: req.signal }).withResponse();
      const time = (performance.now() - started) / 1000;
      const output = openaiOutput(data as unknown as OpenAIResponse, time);
      return { output, call: { request: body, response: data as unknown as Record<string, unknown>, time } };
    },
  };
}

/** The request body for a generate request. */
export function openaiRequest(model: string, req: GenerateRequest, maxTokensKey = 'max_tokens'): Wire {
  const c = req.config;
  const body: Wire = { model, messages: toOpenAIMessages(req.input) };
  if (req.tools.length) {
    body.tools = req.tools.map(toOpenAITool);
    body.tool_choice = toOpenAIToolChoice(req.toolChoice);
  }
  if (c.max_tokens !== undefined) body[maxTokensKey] = c.max_tokens;
  if (c.temperature !== undefined) body.temperature = c.temperature;
  if (c.top_p !== undefined) body.top_p = c.top_p;
  if (c.seed !== undefined) body.seed = c.seed;
  if (c.stop_seqs?.length) body.stop = c.stop_seqs;
  if (c.reasoning_effort !== undefined) body.reasoning_effort = c.reasoning_effort;
  return body;
}

function toOpenAITool(t: ToolInfo): Wire {
  return { type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } };
}

function toOpenAIToolChoice(c: ToolChoice): unknown {
  if (typeof c === 'object') return { type: 'function', function: { name: c.name } };
  return c === 'any' ? 'required' : c;
}

/** Inspect messages as Chat Completions messages. Reasoning is not sent back (the API has no field for it). */
export function toOpenAIMessages(input: ChatMessage[]): Wire[] {
  return input.map(wireOf);
}

// Messages do not change once in the conversation, and the whole conversation is sent on every
// call, so each message is converted once.
const wireCache = new WeakMap<ChatMessage, Wire>();

function wireOf(m: ChatMessage): Wire {
  let w = wireCache.get(m);
  if (!w) {
    w = convert(m);
    wireCache.set(m, w);
  }
  return w;
}

function convert(m: ChatMessage): Wire {
  {
    switch (m.role) {
      case 'system':
        return { role: 'system', content: textOf(m.content) };
      case 'user':
        return { role: 'user', content: userContent(m.content) };
      case 'tool':
        return { role: 'tool', tool_call_id: m.tool_call_id ?? '', content: textOf(m.content) || (m.error ? m.error.message : '') };
      case 'assistant': {
        const text = textOf(m.content);
        const calls = (m.tool_calls ?? []).map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.function, arguments: JSON.stringify(c.arguments) },
        }));
        return { role: 'assistant', content: text || (calls.length ? null : ''), ...(calls.length ? { tool_calls: calls } : {}) };
      }
    }
  }
}

function userContent(content: string | Content[]): unknown {
  if (typeof content === 'string') return content;
  return content.flatMap((c): Wire[] => {
    if (c.type === 'text') return [{ type: 'text', text: c.text }];
    if (c.type === 'image') return [{ type: 'image_url', image_url: { url: c.image, detail: c.detail } }];
    return [];
  });
}

interface OpenAIResponse {
  id?: string;
  model?: string;
  choices: Array<{
    finish_reason: string | null;
    message: {
      content?: string | null;
      refusal?: string | null;
      /** Not in OpenAI's API: vLLM and DeepSeek send `reasoning_content`, OpenRouter and Ollama `reasoning`. */
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: Array<{ id: string; type?: string; function: { name: string; arguments: string } }> | null;
    };
  }>;
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    total_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number | null } | null;
    completion_tokens_details?: { reasoning_tokens?: number | null } | null;
  } | null;
}

const STOP_REASONS: Record<string, StopReason> = {
  stop: 'stop',
  length: 'max_tokens',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  content_filter: 'content_filter',
};

/** A Chat Completions response as an Inspect ModelOutput. */
export function openaiOutput(r: OpenAIResponse, time: number): ModelOutput {
  const choice = r.choices[0];
  const msg = choice?.message ?? {};
  const toolCalls: ToolCall[] = (msg.tool_calls ?? []).map((c) => parseToolCall(c.id, c.function.name, c.function.arguments));
  const text = msg.content ?? msg.refusal ?? '';
  const reasoning = msg.reasoning_content ?? msg.reasoning ?? '';
  const content: string | Content[] = reasoning
    ? [{ type: 'reasoning', reasoning, redacted: false }, ...(text ? [{ type: 'text' as const, text }] : [])]
    : text;
  const message: ChatMessageAssistant = {
    role: 'assistant',
    content,
    source: 'generate',
    ...(r.model ? { model: r.model } : {}),
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const u = r.usage ?? {};
  const input = u.prompt_tokens ?? 0;
  const output = u.completion_tokens ?? 0;
  const cached = u.prompt_tokens_details?.cached_tokens ?? 0;
  const reasoningTokens = u.completion_tokens_details?.reasoning_tokens ?? 0;
  const usage: ModelUsage = {
    input_tokens: input,
    output_tokens: output,
    total_tokens: u.total_tokens ?? input + output,
    ...(cached ? { input_tokens_cache_read: cached } : {}),
    ...(reasoningTokens ? { reasoning_tokens: reasoningTokens } : {}),
  };
  let stop = STOP_REASONS[choice?.finish_reason ?? ''] ?? 'unknown';
  // Some compatible servers say "stop" even when the message carries tool calls.
  if (toolCalls.length && stop === 'stop') stop = 'tool_calls';
  return {
    model: r.model ?? '',
    choices: choice ? [{ message, stop_reason: stop }] : [],
    completion: text,
    usage,
    time,
    ...(r.id ? { response_id: r.id } : {}),
  };
}

/** Tool arguments arrive as a JSON string; a model can get it wrong, which the agent is told. */
function parseToolCall(id: string, name: string, raw: string): ToolCall {
  try {
    const args = raw.trim() ? JSON.parse(raw) : {};
    if (args && typeof args === 'object' && !Array.isArray(args)) return { id, function: name, arguments: args, type: 'function' };
    return { id, function: name, arguments: {}, type: 'function', parse_error: `arguments must be a JSON object, got: ${raw}` };
  } catch (e) {
    return { id, function: name, arguments: {}, type: 'function', parse_error: `arguments are not valid JSON (${(e as Error).message}): ${raw}` };
  }
}

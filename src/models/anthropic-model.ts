import type {
  ChatMessage,
  ChatMessageAssistant,
  Content,
  ContentReasoning,
  GenerateConfig,
  ModelOutput,
  ModelUsage,
  StopReason,
  ToolCall,
  ToolChoice,
  ToolInfo,
} from '../log/types.js';
import type { GenerateRequest, ProviderAdapter } from './types.js';
import { textOf } from './message-text.js';

/**
 * Anthropic requires max_tokens on every request; 16384 leaves room for long tool calls while a
 * non-streaming request still finishes well inside the request timeout.
 */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 16_384;

export interface AnthropicAdapterOptions {
  /** The model id without the provider, e.g. `claude-haiku-4-5`. */
  model: string;
  apiKey: string;
  /** Default: the SDK's (https://api.anthropic.com). */
  baseUrl?: string;
  /** Milliseconds one request may take. */
  timeoutMs: number;
}

type Block = Record<string, unknown>;
interface WireMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

/** The Messages API through the official SDK (non-streaming). */
export async function createAnthropicAdapter(o: AnthropicAdapterOptions): Promise<ProviderAdapter> {
  // Loaded on first use: the SDK is large and most commands never call a model.
  const { default: Anthropic } = await import('@anthropic-ai/sdk');
  // maxRetries 0: src/models/retry.ts is the one retry policy. An explicit timeout also keeps the
  // SDK from refusing large max_tokens without streaming. baseURL and authToken are passed (null
  // when unset) so that only ct's config decides them, not the SDK's own environment lookups.
  const client = new Anthropic({ apiKey: o.apiKey, authToken: null, baseURL: o.baseUrl ?? null, maxRetries: 0, timeout: o.timeoutMs });
  return {
    async send(req) {
      const body = anthropicRequest(o.model, req);
      const started = performance.now();
      const { data } = await client.messages.create(body as never, { signal: req.signal }).withResponse();
      const time = (performance.now() - started) / 1000;
      const output = anthropicOutput(data as unknown as AnthropicResponse, time);
      return { output, call: { request: body, response: data as unknown as Record<string, unknown>, time } };
    },
  };
}

/** The request body for a generate request. */
export function anthropicRequest(model: string, req: GenerateRequest): Record<string, unknown> {
  const { system, messages } = toAnthropicMessages(req.input);
  const c = req.config;
  const body: Record<string, unknown> = { model, max_tokens: maxTokens(c), messages };
  if (system.length) body.system = system;
  if (req.tools.length) {
    body.tools = req.tools.map(toAnthropicTool);
    body.tool_choice = toAnthropicToolChoice(req.toolChoice);
  }
  if (c.temperature !== undefined) body.temperature = c.temperature;
  if (c.top_p !== undefined) body.top_p = c.top_p;
  if (c.stop_seqs?.length) body.stop_sequences = c.stop_seqs;
  if (c.reasoning_tokens) body.thinking = { type: 'enabled', budget_tokens: c.reasoning_tokens };
  return body;
}

function maxTokens(c: GenerateConfig): number {
  if (c.max_tokens !== undefined) return c.max_tokens;
  // The thinking budget counts against max_tokens; keep room for the answer after it.
  return c.reasoning_tokens ? Math.max(DEFAULT_ANTHROPIC_MAX_TOKENS, c.reasoning_tokens + 4096) : DEFAULT_ANTHROPIC_MAX_TOKENS;
}

function toAnthropicTool(t: ToolInfo): Block {
  return { name: t.name, description: t.description, input_schema: t.parameters };
}

function toAnthropicToolChoice(c: ToolChoice): Block {
  if (typeof c === 'object') return { type: 'tool', name: c.name };
  return { type: c };
}

/**
 * System messages become the `system` blocks; tool results become `tool_result` blocks of a user
 * turn; consecutive turns of one role are merged, since the API wants them to alternate.
 */
export function toAnthropicMessages(input: ChatMessage[]): { system: Block[]; messages: WireMessage[] } {
  const system: Block[] = [];
  const messages: WireMessage[] = [];
  for (const m of input) {
    const blocks = blocksOf(m);
    if (m.role === 'system') {
      system.push(...blocks);
      continue;
    }
    const role = m.role === 'assistant' ? 'assistant' : 'user';
    const last = messages.at(-1);
    if (last && last.role === role) last.content.push(...blocks);
    else messages.push({ role, content: [...blocks] });
  }
  return { system, messages };
}

// Messages do not change once in the conversation, and the whole conversation is sent on every
// call, so each message is converted once (this keeps a step's cost from growing with its length).
const blockCache = new WeakMap<ChatMessage, Block[]>();

function blocksOf(m: ChatMessage): Block[] {
  let blocks = blockCache.get(m);
  if (blocks) return blocks;
  switch (m.role) {
    case 'system':
      blocks = textBlocks(m.content);
      break;
    case 'user':
      blocks = userBlocks(m.content);
      break;
    case 'tool':
      blocks = [
        {
          type: 'tool_result',
          tool_use_id: m.tool_call_id ?? '',
          content: textOf(m.content) || (m.error ? m.error.message : '(no output)'),
          ...(m.error ? { is_error: true } : {}),
        },
      ];
      break;
    case 'assistant':
      blocks = assistantBlocks(m);
      break;
  }
  blockCache.set(m, blocks);
  return blocks;
}

function textBlocks(content: string | Content[]): Block[] {
  const text = textOf(content);
  return text ? [{ type: 'text', text }] : [];
}

function userBlocks(content: string | Content[]): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content || '(empty)' }];
  const blocks: Block[] = [];
  for (const c of content) {
    if (c.type === 'text' && c.text) blocks.push({ type: 'text', text: c.text });
    else if (c.type === 'image') blocks.push(imageBlock(c.image as string));
  }
  return blocks.length ? blocks : [{ type: 'text', text: '(empty)' }];
}

function imageBlock(image: string): Block {
  const m = /^data:([^;]+);base64,(.*)$/s.exec(image);
  return m ? { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } } : { type: 'image', source: { type: 'url', url: image } };
}

function assistantBlocks(m: ChatMessageAssistant): Block[] {
  const blocks: Block[] = [];
  if (typeof m.content === 'string') {
    if (m.content) blocks.push({ type: 'text', text: m.content });
  } else {
    for (const c of m.content) {
      if (c.type === 'reasoning') {
        const r = c as ContentReasoning;
        // Thinking is only sent back with its signature (the API rejects it otherwise); reasoning
        // from another provider is dropped.
        if (r.redacted && r.signature === undefined) blocks.push({ type: 'redacted_thinking', data: r.reasoning });
        else if (r.signature) blocks.push({ type: 'thinking', thinking: r.reasoning, signature: r.signature });
      } else if (c.type === 'text' && c.text) blocks.push({ type: 'text', text: c.text });
    }
  }
  for (const call of m.tool_calls ?? []) blocks.push({ type: 'tool_use', id: call.id, name: call.function, input: call.arguments });
  // The API rejects an empty assistant turn.
  return blocks.length ? blocks : [{ type: 'text', text: '(no content)' }];
}

interface AnthropicResponse {
  id: string;
  model: string;
  stop_reason: string | null;
  content: Array<{ type: string; text?: string; thinking?: string; signature?: string; data?: string; id?: string; name?: string; input?: unknown }>;
  usage: {
    input_tokens: number;
    output_tokens: number;
    cache_creation_input_tokens?: number | null;
    cache_read_input_tokens?: number | null;
  };
}

const STOP_REASONS: Record<string, StopReason> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_use: 'tool_calls',
  max_tokens: 'max_tokens',
  model_context_window_exceeded: 'model_length',
  refusal: 'content_filter',
  pause_turn: 'stop',
};

/** A Messages API response as an Inspect ModelOutput. */
export function anthropicOutput(r: AnthropicResponse, time: number): ModelOutput {
  const content: Content[] = [];
  const toolCalls: ToolCall[] = [];
  for (const b of r.content) {
    if (b.type === 'text') content.push({ type: 'text', text: b.text ?? '' });
    else if (b.type === 'thinking') content.push({ type: 'reasoning', reasoning: b.thinking ?? '', signature: b.signature, redacted: false });
    else if (b.type === 'redacted_thinking') content.push({ type: 'reasoning', reasoning: b.data ?? '', redacted: true });
    else if (b.type === 'tool_use') {
      const args = b.input && typeof b.input === 'object' && !Array.isArray(b.input) ? (b.input as Record<string, unknown>) : {};
      toolCalls.push({ id: b.id ?? '', function: b.name ?? '', arguments: args, type: 'function' });
    }
  }
  const text = content.filter((c) => c.type === 'text').map((c) => (c as { text: string }).text).join('\n');
  const hasReasoning = content.some((c) => c.type === 'reasoning');
  const message: ChatMessageAssistant = {
    role: 'assistant',
    content: hasReasoning ? content : text,
    source: 'generate',
    model: r.model,
    ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
  };
  const u = r.usage;
  const cacheWrite = u.cache_creation_input_tokens ?? 0;
  const cacheRead = u.cache_read_input_tokens ?? 0;
  const usage: ModelUsage = {
    input_tokens: u.input_tokens,
    output_tokens: u.output_tokens,
    total_tokens: u.input_tokens + u.output_tokens + cacheWrite + cacheRead,
    ...(cacheWrite ? { input_tokens_cache_write: cacheWrite } : {}),
    ...(cacheRead ? { input_tokens_cache_read: cacheRead } : {}),
  };
  return {
    model: r.model,
    choices: [{ message, stop_reason: STOP_REASONS[r.stop_reason ?? ''] ?? 'unknown' }],
    completion: text,
    usage,
    time,
    response_id: r.id,
  };
}

/**
 * A model API on 127.0.0.1 that speaks the real wire protocols (Anthropic Messages at
 * POST /v1/messages, OpenAI Chat Completions at POST /v1/chat/completions), answering from a
 * script. No model API is reachable from tests; this stands in for it at the protocol level, so
 * the official SDKs, our conversions and retries all run for real.
 *
 * The script is indexed by the conversation's step: the number of assistant turns in the request.
 * That keeps concurrent samples independent and lets a retried request get the same answer.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedToolCall {
  name: string;
  args: Record<string, unknown>;
  /** OpenAI only: the arguments string to send instead of JSON of `args` (e.g. broken JSON). */
  rawArguments?: string;
}

export interface ScriptedReply {
  text?: string;
  /** Anthropic: a thinking block; OpenAI: `reasoning_content` (as vLLM sends it). */
  thinking?: string;
  toolCalls?: ScriptedToolCall[];
  usage?: { input: number; output: number };
}

/** An HTTP failure to send instead of a reply. */
export interface ScriptedFailure {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** Answer with `body(request headers)` instead (a proxy that echoes the request in its error). */
  echo?: (headers: IncomingMessage['headers']) => unknown;
}

export interface RecordedRequest {
  provider: 'anthropic' | 'openai';
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
  step: number;
  /** The status the server answered. */
  status: number;
  /** Milliseconds the server spent on the request (parse, script, reply): the "model's own latency". */
  handlingMs: number;
}

export type Script = (req: { provider: 'anthropic' | 'openai'; body: any; step: number }) => ScriptedReply;

export class FakeModelServer {
  readonly requests: RecordedRequest[] = [];
  /** Failures to answer, in order, before any scripted reply (e.g. one 429). */
  failures: ScriptedFailure[] = [];
  /** Milliseconds to wait before each reply (a slow model). */
  replyDelayMs = 0;
  /** Requests this matches are never answered (a call in flight when its client is killed). */
  holdIf?: (req: { provider: 'anthropic' | 'openai'; body: any; step: number }) => boolean;
  /** Requests held so far by `holdIf`. */
  held = 0;
  private server?: Server;
  private counter = 0;
  private readonly delayed = new Set<NodeJS.Timeout>();

  constructor(public script: Script) {}

  /** Replies in order by step; past the end, the last reply repeats. */
  static sequence(replies: ScriptedReply[]): Script {
    return ({ step }) => replies[Math.min(step, replies.length - 1)]!;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        const started = performance.now();
        const raw = Buffer.concat(chunks).toString();
        const provider = req.url === '/v1/messages' ? 'anthropic' : req.url === '/v1/chat/completions' ? 'openai' : undefined;
        const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
          res.writeHead(status, { 'content-type': 'application/json', ...headers });
          res.end(JSON.stringify(body));
        };
        if (req.method !== 'POST' || !provider) return send(404, { error: { type: 'not_found_error', message: `no route ${req.method} ${req.url}` } });
        let body: any;
        try {
          body = JSON.parse(raw);
        } catch {
          return send(400, { error: { type: 'invalid_request_error', message: 'body is not JSON' } });
        }
        const messages: any[] = body.messages ?? [];
        const step = messages.filter((m) => m.role === 'assistant').length;
        const record = (status: number) =>
          this.requests.push({ provider, path: req.url!, headers: req.headers, body, step, status, handlingMs: performance.now() - started });
        // Anthropic takes the key as x-api-key or as a bearer token (what this SDK version sends).
        const bearer = /^Bearer \S+/.test(String(req.headers.authorization ?? ''));
        const authed = bearer || (provider === 'anthropic' && Boolean(req.headers['x-api-key']));
        if (!authed) {
          record(401);
          return send(401, { error: { type: 'authentication_error', message: 'missing API key' } });
        }
        if (this.holdIf?.({ provider, body, step })) {
          this.held++;
          return;
        }
        const failure = this.failures.shift();
        if (failure) {
          record(failure.status);
          if (failure.echo) return send(failure.status, failure.echo(req.headers), failure.headers);
          return send(failure.status, failure.body ?? { error: { type: 'rate_limit_error', message: 'slow down' } }, failure.headers);
        }
        const reply = this.script({ provider, body, step });
        const answer = () => {
          if (res.destroyed) return record(499);
          send(200, provider === 'anthropic' ? anthropicReply(body, reply, ++this.counter) : openaiReply(body, reply, ++this.counter));
          record(200);
        };
        if (this.replyDelayMs > 0) {
          const timer = setTimeout(() => {
            this.delayed.delete(timer);
            answer();
          }, this.replyDelayMs);
          this.delayed.add(timer);
        } else answer();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get port(): number {
    return (this.server!.address() as AddressInfo).port;
  }

  /** What ANTHROPIC_BASE_URL should be (the SDK appends /v1/messages). */
  get anthropicBaseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** What OPENAI_BASE_URL should be (the SDK appends /chat/completions). */
  get openaiBaseUrl(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  async stop(): Promise<void> {
    for (const t of this.delayed) clearTimeout(t);
    this.delayed.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

/** A scripted reply as a Messages API response body. */
export function anthropicReply(body: any, r: ScriptedReply, n: number): unknown {
  const content: unknown[] = [];
  if (r.thinking) content.push({ type: 'thinking', thinking: r.thinking, signature: `sig-${n}` });
  if (r.text) content.push({ type: 'text', text: r.text, citations: null });
  for (const [i, c] of (r.toolCalls ?? []).entries()) content.push({ type: 'tool_use', id: `toolu_${n}_${i}`, name: c.name, input: c.args });
  return {
    id: `msg_${n}`,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content,
    stop_reason: r.toolCalls?.length ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: r.usage?.input ?? 100, output_tokens: r.usage?.output ?? 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

/** A scripted reply as a Chat Completions response body. */
export function openaiReply(body: any, r: ScriptedReply, n: number): unknown {
  const toolCalls = (r.toolCalls ?? []).map((c, i) => ({ id: `call_${n}_${i}`, type: 'function', function: { name: c.name, arguments: c.rawArguments ?? JSON.stringify(c.args) } }));
  const input = r.usage?.input ?? 100;
  const output = r.usage?.output ?? 20;
  return {
    id: `chatcmpl-${n}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: body.model,
    choices: [
      {
        index: 0,
        finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
        message: {
          role: 'assistant',
          content: r.text ?? null,
          ...(r.thinking ? { reasoning_content: r.thinking } : {}),
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
      },
    ],
    usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
  };
}

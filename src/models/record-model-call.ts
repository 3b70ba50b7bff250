import { errorMessage } from '../errors.js';
import type { Transcript } from '../log/transcript.js';
import type { ChatMessage, Content, ModelCall, ModelEvent, ModelOutput } from '../log/types.js';
import type { GenerateRequest, Model } from './types.js';

/** Texts longer than this are stored once as attachments (Inspect's threshold). */
const ATTACH_OVER = 100;

/**
 * Calls the model and records the call as an Inspect `model` event (input, tools, tool_choice,
 * config, output with usage and time, the raw request/response, retries) and adds its usage to
 * the sample's model_usage. The conversation is sent whole on every call, so long texts in the
 * event are stored once as `attachment://` references, as Inspect does; the sample's `messages`
 * stay inline.
 */
export async function generateAndRecord(model: Model, transcript: Transcript, req: GenerateRequest): Promise<ModelOutput> {
  const event = transcript.event({
    event: 'model',
    model: model.name,
    ...(model.role ? { role: model.role } : {}),
    input: req.input.map((m) => condenseMessage(m, transcript)),
    tools: req.tools,
    tool_choice: req.toolChoice,
    config: req.config,
    output: { model: model.name, choices: [], completion: '' },
    pending: true,
  }) as ModelEvent;
  const started = performance.now();
  const finish = () => {
    delete event.pending;
    event.completed = new Date().toISOString();
    event.working_time = (performance.now() - started) / 1000;
  };
  try {
    const r = await model.generate(req);
    finish();
    event.output = r.output;
    event.call = condenseCall(r.call, transcript);
    event.retries = r.retries;
    if (r.output.usage) transcript.addUsage(model.name, r.output.usage, model.role);
    return r.output;
  } catch (e) {
    finish();
    const message = req.signal?.aborted ? 'cancelled: the sample was stopped during the model call' : errorMessage(e);
    event.error = message;
    event.output = { ...event.output, error: message };
    throw e;
  }
}

// Messages do not change once in the conversation, so each is condensed once per sample.
const condensedMessages = new WeakMap<Transcript, WeakMap<ChatMessage, ChatMessage>>();

function condenseMessage(m: ChatMessage, t: Transcript): ChatMessage {
  let seen = condensedMessages.get(t);
  if (!seen) condensedMessages.set(t, (seen = new WeakMap()));
  let c = seen.get(m);
  if (c) return c;
  c = { ...m, content: condenseContent(m.content, t) } as ChatMessage;
  seen.set(m, c);
  return c;
}

function condenseContent(content: string | Content[], t: Transcript): string | Content[] {
  if (typeof content === 'string') return content.length > ATTACH_OVER ? t.attach(content) : content;
  return content.map((c) => {
    if (c.type === 'text' && c.text.length > ATTACH_OVER) return { ...c, text: t.attach(c.text) };
    if (c.type === 'reasoning' && c.reasoning.length > ATTACH_OVER) return { ...c, reasoning: t.attach(c.reasoning) };
    return c;
  });
}

function condenseCall(call: ModelCall, t: Transcript): ModelCall {
  let seen = condensedJson.get(t);
  if (!seen) condensedJson.set(t, (seen = new WeakMap()));
  return { ...call, request: condenseJson(call.request, t, seen) as Record<string, unknown> };
}

// The providers reuse a message's wire form from call to call, so each is condensed once.
const condensedJson = new WeakMap<Transcript, WeakMap<object, unknown>>();

function condenseJson(v: unknown, t: Transcript, seen: WeakMap<object, unknown>): unknown {
  if (typeof v === 'string') return v.length > ATTACH_OVER ? t.attach(v) : v;
  if (!v || typeof v !== 'object') return v;
  const done = seen.get(v);
  if (done !== undefined) return done;
  let out: unknown;
  if (Array.isArray(v)) {
    const arr = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) arr[i] = condenseJson(v[i], t, seen);
    out = arr;
  } else {
    const obj: Record<string, unknown> = {};
    for (const k in v) obj[k] = condenseJson((v as Record<string, unknown>)[k], t, seen);
    out = obj;
  }
  seen.set(v, out);
  return out;
}

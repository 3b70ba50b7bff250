import type { Transcript } from '../log/transcript.js';
import type { ChatMessageAssistant, GenerateConfig, ModelOutput, ToolCall, ToolInfo } from '../log/types.js';
import { generateAndRecord } from '../models/record-model-call.js';
import type { Model } from '../models/types.js';
import { CONTINUE_PROMPT } from './agent-prompts.js';
import { markReasoningPrivate } from './private-content.js';
import { AGENT_TOOLS } from './tools/tool-definitions.js';
import type { ActionReview, PolicyContext, PolicyResult } from './types.js';

export interface AgentLoopOptions {
  model: Model;
  /** Model calls before the loop stops with a `custom` limit whose reason is max_steps. */
  maxSteps: number;
  config: GenerateConfig;
  /** Default: bash, text_editor, submit. */
  tools?: ToolInfo[];
}

/**
 * The agent loop: call the model with the conversation so far (the transcript's messages, which the
 * policy has started with its prompts), run the tool calls it makes, and repeat until it submits
 * or a limit is reached. Limits, checked before every model call: the sample's message and token
 * limits, then max_steps; the time limit arrives as `ctx.signal`. A reply without tool calls gets
 * a nudge to continue (it counts as a step). Under a protocol, each action is reviewed
 * (`ctx.reviewAction`) before it enters the conversation: it runs, is replaced, or ends the loop.
 */
export async function runAgentLoop(ctx: PolicyContext, o: AgentLoopOptions): Promise<PolicyResult> {
  const tools = o.tools ?? AGENT_TOOLS;
  let last: ModelOutput | undefined;
  for (let step = 0; ; step++) {
    if (ctx.signal.aborted) return withOutput({}, last);
    const limit = limitReached(ctx, step, o.maxSteps);
    if (limit) return withOutput({ limit }, last);
    let output: ModelOutput;
    try {
      output = await generateAndRecord(o.model, ctx.transcript, {
        input: [...ctx.transcript.messages],
        tools,
        toolChoice: 'auto',
        config: o.config,
        signal: ctx.signal,
      });
    } catch (e) {
      // Stopped by the time limit or Ctrl-C: the runner records why.
      if (ctx.signal.aborted) return withOutput({}, last);
      throw e;
    }
    last = output;
    let message = assistantMessage(output);
    if (ctx.reviewAction && (message.tool_calls?.length ?? 0) > 0) {
      let review: ActionReview;
      try {
        review = await ctx.reviewAction({ message, tools });
      } catch (e) {
        if (ctx.signal.aborted) return withOutput({}, last);
        throw e;
      }
      message = review.message;
      if (review.kind === 'stop') {
        ctx.transcript.message(message);
        return withOutput({ limit: review.limit }, last);
      }
      if (review.kind === 'replace') last = review.output;
    }
    ctx.transcript.message(message);
    const calls = message.tool_calls ?? [];
    if (calls.length === 0) {
      ctx.transcript.message({ role: 'user', content: CONTINUE_PROMPT, source: 'input' });
      continue;
    }
    for (const call of calls) {
      if (ctx.signal.aborted) return withOutput({}, last);
      if (call.parse_error !== undefined) {
        recordParseError(ctx.transcript, call);
        continue;
      }
      const r = await ctx.tools.call(call);
      if (r.submitted !== undefined) return withOutput({ submission: r.submitted }, last);
    }
  }
}

/** Calls the model once with the conversation so far, not letting it call tools (for private planning); records it. */
export async function generateOnce(
  ctx: PolicyContext,
  model: Model,
  config: GenerateConfig,
  tools: ToolInfo[] = AGENT_TOOLS,
): Promise<{ output: ModelOutput; message: ChatMessageAssistant }> {
  const output = await generateAndRecord(model, ctx.transcript, {
    input: [...ctx.transcript.messages],
    tools,
    // The tools are offered (so a cached prompt prefix stays the same) but may not be called.
    toolChoice: 'none',
    config,
    signal: ctx.signal,
  });
  return { output, message: assistantMessage(output) };
}

function assistantMessage(output: ModelOutput): ChatMessageAssistant {
  const m = output.choices[0]?.message ?? { role: 'assistant' as const, content: '' };
  return markReasoningPrivate({ ...m, source: 'generate' });
}

function limitReached(ctx: PolicyContext, step: number, maxSteps: number): PolicyResult['limit'] {
  const { messages, tokens } = ctx.limits;
  if (messages !== undefined && ctx.transcript.messages.length >= messages) {
    return { type: 'message', limit: messages, reason: `message limit (${messages}) reached` };
  }
  if (tokens !== undefined) {
    const used = Object.values(ctx.transcript.modelUsage).reduce((n, u) => n + u.total_tokens, 0);
    if (used >= tokens) return { type: 'token', limit: tokens, reason: `token limit (${tokens}) reached: ${used} tokens used` };
  }
  if (step >= maxSteps) return { type: 'custom', limit: maxSteps, reason: `max_steps (${maxSteps}) reached without a submission` };
  return undefined;
}

function withOutput(r: PolicyResult, output: ModelOutput | undefined): PolicyResult {
  return output ? { ...r, output } : r;
}

/** A tool call whose arguments did not parse: the model is told, nothing runs. */
function recordParseError(t: Transcript, call: ToolCall): void {
  const error = { type: 'parsing' as const, message: call.parse_error ?? 'invalid arguments' };
  t.event({
    event: 'tool',
    type: 'function',
    id: call.id,
    function: call.function,
    arguments: call.arguments,
    result: '',
    error,
    events: [],
    completed: new Date().toISOString(),
    working_time: 0,
  });
  t.message({ role: 'tool', content: '', tool_call_id: call.id, function: call.function, error });
}

import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SampleError } from '../errors.js';
import type { Model } from '../models/types.js';
import { textOf } from '../models/message-text.js';
import { checkBudget, estimateCallUsd } from './budget.js';
import { costUsd } from './prices.js';
import type { RunState } from './state.js';
import type { UsageStage } from './types.js';

export interface PipelineCall {
  stage: UsageStage;
  /** The candidate the call is for (its cost is added to it). */
  candidate?: string;
  system: string;
  prompt: string;
}

/**
 * The pipeline's model calls (ideate, generate, repair): checks the budget before the call,
 * records tokens and cost per stage and model in the state (saved), and keeps each call's
 * request and reply in `calls/` of the run directory for whoever wants to see what was asked.
 */
export class PipelineModel {
  constructor(
    private readonly model: Model,
    private readonly state: RunState,
    private readonly maxTokens: number,
    private readonly signal?: AbortSignal,
  ) {}

  get name(): string {
    return this.model.name;
  }

  /** One call; returns the reply's text. */
  async ask(call: PipelineCall): Promise<string> {
    const estimate = estimateCallUsd(this.model.name, call.system.length + call.prompt.length, this.maxTokens);
    checkBudget(this.state.data.options.budgetUsd, this.state.spentUsd(), estimate, `the next ${call.stage} call${call.candidate ? ` (${call.candidate})` : ''}`);
    const r = await this.model.generate({
      input: [
        { role: 'system', content: call.system },
        { role: 'user', content: call.prompt },
      ],
      tools: [],
      toolChoice: 'none',
      config: { max_tokens: this.maxTokens },
      ...(this.signal ? { signal: this.signal } : {}),
    });
    const usage = r.output.usage;
    const inputTokens = usage?.input_tokens ?? 0;
    const outputTokens = usage?.output_tokens ?? 0;
    const cost = costUsd(this.model.name, inputTokens, outputTokens);
    this.state.addUsage(call.stage, this.model.name, { calls: 1, inputTokens, outputTokens, costUsd: cost });
    if (call.candidate) {
      const c = this.state.data.candidates.find((x) => x.id === call.candidate);
      if (c) c.costUsd += cost;
    }
    this.state.save();
    const message = r.output.choices[0]?.message;
    const text = message ? textOf(message.content) : '';
    this.keep(call, text);
    if (!text.trim()) throw new SampleError(`model ${this.model.name} gave an empty reply at ${call.stage}`);
    return text;
  }

  private keep(call: PipelineCall, reply: string): void {
    const dir = join(this.state.dir, 'calls');
    mkdirSync(dir, { recursive: true });
    const n = readdirSync(dir).length + 1;
    const name = `${String(n).padStart(3, '0')}-${call.stage}${call.candidate ? `-${call.candidate}` : ''}.json`;
    writeFileSync(join(dir, name), `${JSON.stringify({ model: this.model.name, ...call, reply }, null, 2)}\n`);
  }
}

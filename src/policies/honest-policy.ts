import { runAgentLoop } from './agent-loop.js';
import { AGENT_SYSTEM_PROMPT } from './agent-prompts.js';
import { MODEL_POLICY_ARGS, parseModelPolicyArgs } from './model-policy-args.js';
import { taskPrompt } from './task-prompt.js';
import type { PolicyDefinition } from './types.js';

/** A model works on the main task with bash, text_editor and submit, and nothing else. */
export const honestPolicy: PolicyDefinition = {
  name: 'honest',
  description: 'A model works on the main task with bash, text_editor and submit.',
  args: MODEL_POLICY_ARGS,
  async create(args, env) {
    const s = parseModelPolicyArgs('honest', args);
    const model = await env.models.get(s.model, { baseUrl: s.baseUrl });
    return {
      name: 'honest',
      model: model.name,
      async run(ctx) {
        ctx.transcript.message({ role: 'system', content: AGENT_SYSTEM_PROMPT, source: 'input' });
        ctx.transcript.message({ role: 'user', content: taskPrompt(ctx.sample), source: 'input' });
        return runAgentLoop(ctx, { model, maxSteps: s.maxSteps, config: s.config });
      },
    };
  },
};

import type { PolicyDefinition } from './types.js';
import { newToolCallId } from './tools/agent-tools.js';
import { taskPrompt } from './task-prompt.js';

/** No model: states the task and submits at once. Checks the plumbing (sandbox, scorers, log). */
export const testPolicy: PolicyDefinition = {
  name: 'test',
  description: 'No model; submits immediately (for checking environments and scorers).',
  args: { answer: { description: 'What to submit.', default: '' } },
  create(args) {
    return {
      name: 'test',
      async run(ctx) {
        ctx.transcript.message({ role: 'user', content: taskPrompt(ctx.sample), source: 'input' });
        const call = { id: newToolCallId(), function: 'submit', arguments: { answer: args.answer ?? '' }, type: 'function' as const };
        ctx.transcript.message({ role: 'assistant', content: '', tool_calls: [call], source: 'generate' });
        const r = await ctx.tools.call(call);
        return { submission: r.submitted };
      },
    };
  },
};

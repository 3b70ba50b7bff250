import { SampleError } from '../errors.js';
import type { SideTask } from '../tasks/types.js';
import { generateOnce, runAgentLoop } from './agent-loop.js';
import { AGENT_SYSTEM_PROMPT, ATTACK_EXECUTE_PROMPT, ATTACK_PLAN_PROMPT, attackInstructions, obviousAttackInstructions } from './agent-prompts.js';
import { MODEL_POLICY_ARGS, parseBoolArg, parseModelPolicyArgs } from './model-policy-args.js';
import { privateMessage } from './private-content.js';
import { taskPrompt } from './task-prompt.js';
import type { PolicyDefinition } from './types.js';

/**
 * The attack policies: the honest agent's prompts, plus side-task instructions in a private
 * system message (see private-content.ts), so what a monitor sees has the honest shape. With
 * `plan`, the model first writes a private plan.
 */
function attackDefinition(name: 'attack' | 'obvious-attack', instructions: (side: SideTask) => string, description: string): PolicyDefinition {
  return {
    name,
    description,
    args: {
      ...MODEL_POLICY_ARGS,
      plan: { description: 'first ask the model for a private plan (one extra model call)', default: 'false' },
    },
    async create(args, env) {
      const s = parseModelPolicyArgs(name, args);
      const plan = parseBoolArg(name, 'plan', args.plan, false);
      const model = await env.models.get(s.model, { baseUrl: s.baseUrl });
      return {
        name,
        model: model.name,
        needsSideTask: true,
        async run(ctx) {
          const side = ctx.sample.sideTask;
          if (!side) throw new SampleError(`policy ${name} needs a sample with a side task; ${ctx.sample.id} has none`);
          const t = ctx.transcript;
          t.message({ role: 'system', content: AGENT_SYSTEM_PROMPT, source: 'input' });
          t.message(privateMessage({ role: 'system', content: instructions(side), source: 'input' }));
          t.message({ role: 'user', content: taskPrompt(ctx.sample), source: 'input' });
          let steps = s.maxSteps;
          if (plan) {
            t.message(privateMessage({ role: 'user', content: ATTACK_PLAN_PROMPT, source: 'input' }));
            const { message } = await generateOnce(ctx, model, s.config);
            t.message(privateMessage(message));
            t.message(privateMessage({ role: 'user', content: ATTACK_EXECUTE_PROMPT, source: 'input' }));
            steps = Math.max(1, steps - 1);
          }
          return runAgentLoop(ctx, { model, maxSteps: steps, config: s.config });
        },
      };
    },
  };
}

export const attackPolicy = attackDefinition(
  'attack',
  attackInstructions,
  'A model does the main task and, covertly, the side task (side-task instructions kept private in the log).',
);

/** Attack without the stealth instructions: a baseline for how detectable the side task is. */
export const obviousAttackPolicy = attackDefinition(
  'obvious-attack',
  obviousAttackInstructions,
  'A model does the main task and the side task, told it need not hide it.',
);

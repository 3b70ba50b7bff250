import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { ConfigError, SampleError } from '../errors.js';
import type { ToolCall } from '../log/types.js';
import { newToolCallId } from './tools/agent-tools.js';
import { taskPrompt } from './task-prompt.js';
import type { PolicyDefinition } from './types.js';

const lineSchema = z.object({
  function: z.enum(['bash', 'text_editor', 'submit']),
  arguments: z.record(z.string(), z.unknown()),
  id: z.string().optional(),
});

export interface RecordedCall {
  function: string;
  arguments: Record<string, unknown>;
}

/** Reads a JSONL trajectory: one `{"function", "arguments"}` tool call a line. */
export function readTrajectoryFile(file: string): RecordedCall[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read trajectory ${file}: ${(e as Error).message}`);
  }
  const calls: RecordedCall[] = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (e) {
      throw new ConfigError(`${file}:${i + 1}: not valid JSON (${(e as Error).message})`);
    }
    const r = lineSchema.safeParse(raw);
    if (!r.success) {
      throw new ConfigError(
        `${file}:${i + 1}: ${r.error.issues.map((x) => `${x.path.join('.') || 'line'}: ${x.message}`).join('; ')} (expected {"function": "bash"|"text_editor"|"submit", "arguments": {...}})`,
      );
    }
    calls.push({ function: r.data.function, arguments: r.data.arguments });
  });
  return calls;
}

/** Tool calls of a recorded sample in an `.eval` log (assistant messages' tool_calls, in order). */
export async function readTrajectoryFromLog(file: string, sampleId: string, epoch = 1): Promise<RecordedCall[]> {
  const { readEvalSample } = await import('../log/eval-reader.js');
  let sample;
  try {
    sample = await readEvalSample(file, sampleId, epoch);
  } catch (e) {
    throw new ConfigError(`cannot read sample ${sampleId} (epoch ${epoch}) from ${file}: ${(e as Error).message}`);
  }
  const calls: RecordedCall[] = [];
  for (const m of sample.messages) {
    if (m.role === 'assistant') for (const c of m.tool_calls ?? []) calls.push({ function: c.function, arguments: c.arguments });
  }
  return calls;
}

/**
 * In a trajectory directory, the file of one sample: its id with `:` written as `__` (so it is a
 * valid file name everywhere), e.g. `notes_app__fix_config__copy_secret.jsonl`.
 */
export function trajectoryFileName(sampleId: string): string {
  return `${sampleId.replaceAll(':', '__')}.jsonl`;
}

/**
 * Replays recorded tool calls in the sandbox, then submits (the recorded submit, or an empty
 * one). `trajectory` is a JSONL file (every sample replays it), a directory of
 * `<sample id>.jsonl` files (each sample replays its own), or an `.eval` log with `sample_id`
 * (and `epoch`).
 */
export const replayPolicy: PolicyDefinition = {
  name: 'replay',
  description: 'Replays a recorded list of tool calls (JSONL, or a sample of an .eval log), then submits.',
  args: {
    trajectory: { description: 'JSONL file of tool calls, a directory of <sample id>.jsonl (`:` as `__`), or an .eval log', required: true },
    sample_id: { description: 'With an .eval log: the sample to replay' },
    epoch: { description: 'With an .eval log: the epoch to replay', default: '1' },
  },
  async create(args) {
    const file = args.trajectory;
    if (!file) throw new ConfigError('--policy replay needs --trajectory FILE (JSONL of tool calls, or an .eval log)');
    let calls: RecordedCall[] | undefined;
    const perSample = existsSync(file) && statSync(file).isDirectory();
    if (perSample) {
      // Each sample's file is read when the sample starts; a missing one fails that sample alone.
    } else if (file.endsWith('.eval')) {
      if (!args.sample_id) throw new ConfigError('replaying an .eval log needs the sample id: -p sample_id=ID (or --trajectory FILE#ID)');
      calls = await readTrajectoryFromLog(file, args.sample_id, Number(args.epoch ?? 1));
    } else {
      calls = readTrajectoryFile(file);
    }
    return {
      name: 'replay',
      async run(ctx) {
        let recorded = calls;
        if (!recorded) {
          const own = join(file, trajectoryFileName(ctx.sample.id));
          if (!existsSync(own)) throw new SampleError(`no trajectory for sample ${ctx.sample.id}: expected ${own}`);
          recorded = readTrajectoryFile(own);
        }
        ctx.transcript.message({ role: 'user', content: taskPrompt(ctx.sample), source: 'input' });
        for (const c of recorded) {
          if (ctx.signal.aborted) return {};
          const call: ToolCall = { id: newToolCallId(), function: c.function, arguments: c.arguments, type: 'function' };
          ctx.transcript.message({ role: 'assistant', content: '', tool_calls: [call], source: 'generate' });
          const r = await ctx.tools.call(call);
          if (r.submitted !== undefined) return { submission: r.submitted };
          if (ctx.limits.messages !== undefined && ctx.transcript.messages.length >= ctx.limits.messages) {
            return { limit: { type: 'message', limit: ctx.limits.messages } };
          }
        }
        const call: ToolCall = { id: newToolCallId(), function: 'submit', arguments: { answer: '' }, type: 'function' };
        ctx.transcript.message({ role: 'assistant', content: '', tool_calls: [call], source: 'generate' });
        const r = await ctx.tools.call(call);
        return { submission: r.submitted };
      },
    };
  },
};

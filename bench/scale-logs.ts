/**
 * One-sample logs for the merge bench, shaped like a fleet worker's (a `test`-policy sample: the
 * task prompt, a submit call and its result, a score, a few events), written by ct's own writer.
 */
import { EvalLogWriter } from '../src/log/eval-writer.js';
import { shortUuid } from '../src/log/ids.js';
import { linuxScorerSpec } from '../src/log/metrics.js';
import { isoTimestamp } from '../src/log/timestamps.js';
import { EVAL_CONFIG_DEFAULTS, EvalSampleSchema, type EvalPlan, type EvalSample, type EvalSpec } from '../src/log/types.js';

export function benchScaleSpec(task: string, samples: number): EvalSpec {
  return {
    eval_id: shortUuid(),
    run_id: shortUuid(),
    created: isoTimestamp(),
    task,
    task_id: shortUuid(),
    task_version: 0,
    task_attribs: {},
    task_args: {},
    task_args_passed: {},
    dataset: { name: task, samples, sample_ids: [], shuffled: false },
    sandbox: { type: 'local' },
    model: 'none/none',
    model_generate_config: {},
    model_args: {},
    config: { ...EVAL_CONFIG_DEFAULTS, max_samples: 8, fail_on_error: false },
    packages: { ct: '0.1.0' },
    metadata: {},
    scorers: [linuxScorerSpec()],
  };
}

export function benchScalePlan(): EvalPlan {
  return { name: 'plan', steps: [{ solver: 'test', params: {}, params_passed: {} }], config: {} };
}

/** A sample of about the size a `test`-policy sample has in a ct log (~2 KB compressed). */
export function benchSample(id: number): EvalSample {
  const t = isoTimestamp();
  const prompt = `Sample ${id}. ${'Make the service answer on port 8080 with the status page, and keep the notes in /srv/notes. '.repeat(12)}`;
  const call = { id: `call_${shortUuid()}`, function: 'submit', arguments: { answer: '' }, type: 'function' as const };
  const span = shortUuid();
  return EvalSampleSchema.parse({
    id: `s${id}`,
    epoch: 1,
    input: prompt,
    target: '',
    messages: [
      { id: shortUuid(), role: 'user', content: prompt, source: 'input' },
      { id: shortUuid(), role: 'assistant', content: '', tool_calls: [call], source: 'generate' },
      { id: shortUuid(), role: 'tool', content: '', tool_call_id: call.id, function: 'submit' },
    ],
    scores: { linux_scorer: { value: { main_task_success: id % 3 ? 'C' : 'I', side_task_success: 'I' }, explanation: 'main: check passed\nside: check failed', history: [] } },
    events: [
      { uuid: shortUuid(), span_id: span, timestamp: t, working_start: 0, event: 'span_begin', id: span, type: 'init', name: 'init' },
      { uuid: shortUuid(), span_id: span, timestamp: t, working_start: 0.01, event: 'sandbox', action: 'exec', cmd: 'bash setup.sh', result: 0, output: 'ok', completed: t },
      { uuid: shortUuid(), span_id: span, timestamp: t, working_start: 0.02, event: 'span_end', id: span },
    ],
    model_usage: {},
    started_at: t,
    completed_at: t,
    total_time: 0.3,
    working_time: 0.3,
    uuid: shortUuid(),
  });
}

/** Writes `n` one-sample logs into `dir` (a few at a time). */
export async function writeOneSampleLogs(dir: string, n: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const writer = await EvalLogWriter.create({ logDir: dir, fileName: `${String(i).padStart(7, '0')}.eval`, spec: benchScaleSpec('job', 1), plan: benchScalePlan() });
      await writer.addSample(benchSample(i));
      await writer.finish({ status: 'success', totalSamples: 1, stats: { started_at: isoTimestamp(), completed_at: isoTimestamp(), connection_limit_history: [] } });
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

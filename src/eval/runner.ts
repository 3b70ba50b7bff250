import { errorMessage } from '../errors.js';
import { EvalLogWriter } from '../log/eval-writer.js';
import { shortUuid, stableShortId } from '../log/ids.js';
import { linuxScorerSpec } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import { EVAL_CONFIG_DEFAULTS, type EvalLog, type EvalSpec, type EvalStatus } from '../log/types.js';
import type { Policy } from '../policies/types.js';
import type { SandboxProvider } from '../sandbox/types.js';
import type { Sample } from '../tasks/types.js';
import type { ProgressReporter } from './progress.js';
import { runSample, SCORER_NAME, type RunSampleOptions } from './run-sample.js';

export interface RunEvalOptions {
  /** Name of the run's task (the task set, or the environments). */
  taskName: string;
  samples: Sample[];
  epochs: number;
  /** Samples running at once. */
  maxSamples: number;
  failOnError: boolean;
  provider: SandboxProvider;
  policy: Policy;
  policyArgs: Record<string, string>;
  /** `provider/model` the policy calls, for the log's `eval.model` (default none/none). */
  model?: string;
  sampleOptions: RunSampleOptions;
  logDir: string;
  runId: string;
  version: string;
  progress: ProgressReporter;
  /** Aborted on Ctrl-C: no new samples start, running ones stop and are torn down. */
  signal: AbortSignal;
}

export interface RunEvalResult {
  logPath: string;
  status: EvalStatus;
  samples: Array<{ id: string; epoch: number; scores?: Record<string, string>; error?: string; seconds: number }>;
  header: EvalLog;
}

/**
 * The local runner: builds each environment once, runs samples x epochs through `runSample`
 * with at most `maxSamples` at once, and writes every finished sample to the log as it lands.
 */
export async function runEval(o: RunEvalOptions): Promise<RunEvalResult> {
  const startedAt = isoTimestamp();
  const writer = await EvalLogWriter.create({ logDir: o.logDir, spec: evalSpec(o), plan: evalPlan(o) });
  const work: Array<{ sample: Sample; epoch: number }> = [];
  for (let epoch = 1; epoch <= o.epochs; epoch++) for (const sample of o.samples) work.push({ sample, epoch });
  const finished: RunEvalResult['samples'] = [];
  let runError: string | undefined;
  o.progress.start(work.length);
  try {
    const envs = [...new Map(o.samples.map((s) => [s.env.composeFile, s.env])).values()];
    for (const env of envs) {
      if (o.signal.aborted) break;
      await o.provider.taskInit({ name: env.id, composeFile: env.composeFile }, o.signal);
    }
    let next = 0;
    const worker = async () => {
      while (!o.signal.aborted && next < work.length) {
        const { sample, epoch } = work[next++]!;
        o.progress.sampleStarted(sample.id, epoch);
        const result = await runSample({ sample, epoch, provider: o.provider, policy: o.policy, options: o.sampleOptions, signal: o.signal });
        await writer.addSample(result);
        const score = result.scores?.[SCORER_NAME]?.value as Record<string, string> | undefined;
        const row = { id: sample.id, epoch, scores: score, error: result.error?.message, seconds: result.total_time ?? 0 };
        finished.push(row);
        o.progress.sampleFinished(row);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(o.maxSamples, work.length)) }, worker));
  } catch (e) {
    runError = errorMessage(e);
  } finally {
    await o.provider.taskCleanup().catch(() => {});
    o.progress.stop();
  }
  const failed = finished.some((f) => f.error);
  const status: EvalStatus = o.signal.aborted ? 'cancelled' : runError || (failed && o.failOnError) ? 'error' : 'success';
  // The writer accumulates results and model usage as samples land: no sample is kept here.
  const header = await writer.finish({
    status,
    totalSamples: work.length,
    stats: { started_at: startedAt, completed_at: isoTimestamp(), connection_limit_history: [] },
    ...(runError
      ? { error: { message: runError, traceback: runError, traceback_ansi: runError } }
      : failed && o.failOnError
        ? { error: { message: `${finished.filter((f) => f.error).length} sample(s) failed`, traceback: '', traceback_ansi: '' } }
        : {}),
  });
  return { logPath: writer.path, status, samples: finished, header };
}

function evalSpec(o: RunEvalOptions): EvalSpec {
  const sampleIds = o.samples.map((s) => s.id);
  // Stable across re-runs of the same selection, so Inspect's tooling sees one task.
  const taskId = stableShortId(JSON.stringify([o.taskName, sampleIds, o.epochs, o.policy.name, o.policyArgs]));
  return {
    eval_id: shortUuid(),
    run_id: shortUuid(),
    created: isoTimestamp(),
    task: o.taskName,
    task_id: taskId,
    task_version: 0,
    task_attribs: {},
    task_args: {},
    task_args_passed: {},
    solver: o.policy.name,
    solver_args: o.policyArgs,
    dataset: { name: o.taskName, samples: o.samples.length, sample_ids: sampleIds, shuffled: false },
    sandbox: { type: o.provider.name },
    model: o.model ?? 'none/none',
    model_generate_config: {},
    model_args: {},
    config: {
      ...EVAL_CONFIG_DEFAULTS,
      epochs: o.epochs,
      max_samples: o.maxSamples,
      fail_on_error: o.failOnError,
      ...(o.sampleOptions.sampleTimeLimit !== undefined ? { time_limit: o.sampleOptions.sampleTimeLimit } : {}),
      ...(o.sampleOptions.messageLimit !== undefined ? { message_limit: o.sampleOptions.messageLimit } : {}),
      ...(o.sampleOptions.tokenLimit !== undefined ? { token_limit: o.sampleOptions.tokenLimit } : {}),
    },
    packages: { ct: o.version },
    metadata: { ct_run_id: o.runId, policy: o.policy.name, policy_args: o.policyArgs },
    scorers: [linuxScorerSpec(o.samples.some((s) => s.sideTask) ? undefined : ['main_task_success'])],
  };
}

function evalPlan(o: RunEvalOptions) {
  return {
    name: 'plan',
    steps: [{ solver: o.policy.name, params: o.policyArgs, params_passed: o.policyArgs }],
    config: {},
  };
}

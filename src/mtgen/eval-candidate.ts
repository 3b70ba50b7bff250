import { rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { ProgressReporter } from '../eval/progress.js';
import type { RunSession } from '../eval/run-session.js';
import { runEval } from '../eval/runner.js';
import type { SampleOptions } from '../eval/sample-options.js';
import type { Policy } from '../policies/types.js';
import { loadMainTask } from '../tasks/environment-loader.js';
import type { Environment, Sample } from '../tasks/types.js';
import { costUsd } from './prices.js';
import type { RunState } from './state.js';
import type { Candidate } from './types.js';

export interface EvalCandidateOptions {
  session: RunSession;
  state: RunState;
  env: Environment;
  candidate: Candidate;
  /** The candidate's folder. */
  dir: string;
  policy: Policy;
  policyArgs: Record<string, string>;
  epochs: number;
  sampleOptions: SampleOptions;
  version: string;
  progress: ProgressReporter;
}

export type EvalOutcome = { status: 'done'; passes: number; scored: number; logPath: string; firstError?: string } | { status: 'cancelled' };

/**
 * Stage 5: the honest policy on the candidate, `epochs` times, through the same runner as
 * `ct run eval`: the log is an ordinary .eval file in `evals/<id>/` of the run directory. A
 * previous attempt's partial log (the process was killed) is removed first, so each candidate
 * has exactly one. The eval's tokens and cost are added to the state.
 */
export async function evalCandidate(o: EvalCandidateOptions): Promise<EvalOutcome> {
  const logDir = join(o.state.dir, 'evals', o.candidate.id);
  rmSync(logDir, { recursive: true, force: true });
  const sample: Sample = { id: `${o.env.id}:${o.candidate.id}`, env: o.env, mainTask: loadMainTask(o.dir) };
  const result = await runEval({
    taskName: `mtgen-${o.candidate.id}`,
    samples: [sample],
    epochs: o.epochs,
    maxSamples: o.epochs,
    session: o.session,
    policy: o.policy,
    policyArgs: o.policyArgs,
    ...(o.policy.model ? { model: o.policy.model } : {}),
    // A candidate's errors are findings for the filter stage, not a failed run.
    sampleOptions: o.sampleOptions,
    logDir,
    version: o.version,
    progress: o.progress,
  });
  for (const [model, u] of Object.entries(result.header.stats.model_usage ?? {})) {
    const cost = costUsd(model, u.input_tokens, u.output_tokens);
    o.state.addUsage('eval', model, { calls: 0, inputTokens: u.input_tokens, outputTokens: u.output_tokens, costUsd: cost });
    o.candidate.costUsd += cost;
  }
  if (result.status === 'cancelled') {
    o.state.save();
    return { status: 'cancelled' };
  }
  const [passes, scored] = result.tally.main;
  const firstError = result.tally.firstError() ?? result.error;
  return { status: 'done', passes, scored, logPath: relative(o.state.dir, result.logPath), ...(firstError ? { firstError } : {}) };
}

/**
 * The log's eval spec and plan: what a run is (task, samples, epochs, policy, sandbox, limits).
 * The local runner writes them at the start of its log; the fleet controller writes the same into
 * the merged log, and a fleet worker into each one-sample log, so all three describe a run alike.
 */
import { shortUuid, stableShortId } from '../log/ids.js';
import { linuxScorerSpec } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import { EVAL_CONFIG_DEFAULTS, type EvalPlan, type EvalSpec } from '../log/types.js';
import type { ProtocolPlan } from '../control/protocol-plan.js';
import type { SampleOptions } from './sample-options.js';

export interface EvalSpecInput {
  /** Name of the run's task (the task set, or the environments). */
  taskName: string;
  /** The selected samples, in selection order (their ids; whether any has a side task). */
  samples: ReadonlyArray<{ id: string; sideTask?: unknown }>;
  epochs: number;
  /** Samples running at once. */
  maxSamples: number;
  /** The sandbox provider's name (`docker`, `ec2`, ...). */
  sandbox: string;
  policyName: string;
  policyArgs: Record<string, string>;
  /** `--protocol` around the policy, when there is one (the log's solver and `metadata.protocol`). */
  protocol?: ProtocolPlan;
  /** `provider/model` the policy calls, for the log's `eval.model` (default none/none). */
  model?: string;
  sampleOptions: SampleOptions;
  /** ct's run id (also in sandbox project names), kept in the spec's metadata. */
  runId: string;
  /** ct's version, for `packages.ct`. */
  version: string;
  /** Host powers the run trusted, by setting (`metadata.compose_trust`; absent when none). */
  trusted?: Record<string, string[]>;
}

/** The spec of a run; `task_id` is stable across re-runs of the same selection. */
export function evalSpec(o: EvalSpecInput): EvalSpec {
  const sampleIds = o.samples.map((s) => s.id);
  // Stable across re-runs of the same selection, so Inspect's tooling sees one task.
  const taskId = stableShortId(JSON.stringify([o.taskName, sampleIds, o.epochs, o.policyName, o.policyArgs, ...(o.protocol ? [o.protocol] : [])]));
  const solver = solverOf(o);
  return {
    eval_id: shortUuid(),
    run_id: shortUuid(),
    // Whole seconds, as Inspect writes it: the log's name begins with it.
    created: isoTimestamp(new Date(), 'seconds'),
    task: o.taskName,
    task_id: taskId,
    task_version: 0,
    task_attribs: {},
    task_args: {},
    task_args_passed: {},
    solver: solver.name,
    solver_args: solver.args,
    dataset: { name: o.taskName, samples: o.samples.length, sample_ids: sampleIds, shuffled: false },
    sandbox: { type: o.sandbox },
    model: o.model ?? 'none/none',
    model_generate_config: {},
    model_args: {},
    config: {
      ...EVAL_CONFIG_DEFAULTS,
      epochs: o.epochs,
      max_samples: o.maxSamples,
      fail_on_error: o.sampleOptions.failOnError,
      ...(o.sampleOptions.sampleTimeLimit !== undefined ? { time_limit: o.sampleOptions.sampleTimeLimit } : {}),
      ...(o.sampleOptions.messageLimit !== undefined ? { message_limit: o.sampleOptions.messageLimit } : {}),
      ...(o.sampleOptions.tokenLimit !== undefined ? { token_limit: o.sampleOptions.tokenLimit } : {}),
    },
    packages: { ct: o.version },
    metadata: { ct_run_id: o.runId, policy: o.policyName, policy_args: o.policyArgs, ...(o.protocol ? { protocol: o.protocol } : {}),
      ...(o.trusted && Object.keys(o.trusted).length ? { compose_trust: o.trusted } : {}),
    },
    scorers: [linuxScorerSpec(o.samples.some((s) => s.sideTask) ? undefined : ['main_task_success'])],
  };
}

/** The plan: one solver step, the policy (or protocol) with its arguments. */
export function evalPlan(o: Pick<EvalSpecInput, 'policyName' | 'policyArgs' | 'protocol'>): EvalPlan {
  const solver = solverOf(o);
  return {
    name: 'plan',
    steps: [{ solver: solver.name, params: solver.args, params_passed: solver.args }],
    config: {},
  };
}

/** The log's solver: the policy, or the protocol with the untrusted policy among its arguments. */
function solverOf(o: Pick<EvalSpecInput, 'policyName' | 'policyArgs' | 'protocol'>): { name: string; args: Record<string, unknown> } {
  if (!o.protocol) return { name: o.policyName, args: o.policyArgs };
  const { name, ...rest } = o.protocol;
  return { name, args: { untrusted_policy: o.policyName, untrusted_policy_args: o.policyArgs, ...rest } };
}

/**
 * The parts of the manifest the controller and the worker of this run add to `protocol.ts`'s
 * schema (the sandbox kind, the policy's import roots), the job list of a run, and the log
 * header both sides write. Temporary seam: the manifest schema, setting pins and the eval spec
 * move to `fleet/manifest` and `eval/eval-spec.ts`; until then they are built here, once.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { shortUuid } from '../log/ids.js';
import { linuxScorerSpec } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import { EVAL_CONFIG_DEFAULTS, type EvalPlan, type EvalSpec } from '../log/types.js';
import { sampleOptionsSchema, type SampleOptions } from '../eval/sample-options.js';
import type { Sample } from '../tasks/types.js';
import { manifestSchema, type Job } from './protocol.js';

/** The manifest as this ct writes it: protocol.ts's fields plus what the worker builds its run from. */
export const runManifestSchema = manifestSchema.extend({
  /** The sandbox kind workers run samples in (`docker`, or `module:export` from an extra-src tree). */
  sandbox: z.string().min(1).default('docker'),
  /** Folder names of the extra-src trees, searched for `module:export` policies and sandboxes. */
  extra_src: z.array(z.string()).default([]),
  sample_options: sampleOptionsSchema,
});
export type RunManifest = z.infer<typeof runManifestSchema>;

/**
 * A job's id: the sample id with `:` as `.` and its epoch, e.g. `notes_app.fix_config.e3`.
 * Readable in S3 listings and stable across runs, so a resume finds its results.
 */
export function jobId(sampleId: string, epoch: number): string {
  return `${sampleId.replaceAll(':', '.')}.e${epoch}`;
}

/** Every sample-epoch of the run, epoch-major (the order a local run takes them). */
export function jobsOf(samples: readonly Sample[], epochs: number): Job[] {
  const jobs: Job[] = [];
  for (let epoch = 1; epoch <= epochs; epoch++) {
    for (const s of samples) {
      jobs.push({
        job_id: jobId(s.id, epoch),
        sample_id: s.id,
        setting: s.env.setting,
        env: s.env.id,
        main_task: s.mainTask.id,
        ...(s.sideTask ? { side_task: s.sideTask.id } : {}),
        epoch,
      });
    }
  }
  return jobs;
}

/** The log header of a fleet run (the merged log's, and each one-sample log's). */
export function fleetEvalSpec(m: RunManifest, o: { version: string; created?: string }): EvalSpec {
  const sampleIds = [...new Set(m.jobs.map((j) => j.sample_id))];
  const opts: SampleOptions = m.sample_options;
  // Stable across re-runs of the same selection, so Inspect's tooling sees one task.
  const taskId = createHash('sha256')
    .update(JSON.stringify([m.task_name, sampleIds, m.epochs, m.policy.name, m.policy.args]))
    .digest('base64url')
    .slice(0, 22);
  return {
    eval_id: shortUuid(),
    run_id: shortUuid(),
    created: o.created ?? isoTimestamp(),
    task: m.task_name,
    task_id: taskId,
    task_version: 0,
    task_attribs: {},
    task_args: {},
    task_args_passed: {},
    solver: m.policy.name,
    solver_args: m.policy.args,
    dataset: { name: m.task_name, samples: sampleIds.length, sample_ids: sampleIds, shuffled: false },
    sandbox: { type: m.sandbox },
    model: m.model ?? 'none/none',
    model_generate_config: {},
    model_args: {},
    config: {
      ...EVAL_CONFIG_DEFAULTS,
      epochs: m.epochs,
      max_samples: m.samples_per_worker,
      fail_on_error: true,
      ...(opts.sampleTimeLimit !== undefined ? { time_limit: opts.sampleTimeLimit } : {}),
      ...(opts.messageLimit !== undefined ? { message_limit: opts.messageLimit } : {}),
      ...(opts.tokenLimit !== undefined ? { token_limit: opts.tokenLimit } : {}),
    },
    packages: { ct: o.version },
    metadata: { ct_run_id: m.fleet_id, fleet_id: m.fleet_id, policy: m.policy.name, policy_args: m.policy.args },
    scorers: [linuxScorerSpec(m.jobs.some((j) => j.side_task) ? undefined : ['main_task_success'])],
  };
}

export function fleetEvalPlan(m: RunManifest): EvalPlan {
  return { name: 'plan', steps: [{ solver: m.policy.name, params: m.policy.args, params_passed: m.policy.args }], config: {} };
}

/**
 * A job's result as bytes: a finished one-sample `.eval` (what a worker uploads for a job, and
 * what the controller stores for a job SQS dead-lettered), and back.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evalPlan, evalSpec } from '../eval/eval-spec.js';
import { EvalLogWriter } from '../log/eval-writer.js';
import { finalStatus } from '../log/final-status.js';
import { computeEvalResults, totalModelUsage } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { CheckedInput } from '../log/eval-merge.js';
import type { EvalPlan, EvalSample, EvalSpec } from '../log/types.js';
import { canonicalJson } from './fleet-id.js';
import type { AnyJob, Manifest } from './protocol.js';

/** The log header of a fleet run, from its manifest (the merged log's, and each one-sample log's). */
export function fleetLogHeader(m: Manifest, version: string): { spec: EvalSpec; plan: EvalPlan } {
  const samples = [...new Map(m.jobs.map((j) => [j.sample_id, { id: j.sample_id, ...(j.side_task ? { sideTask: j.side_task } : {}) }])).values()];
  const input = {
    taskName: m.task_name,
    samples,
    epochs: m.epochs,
    maxSamples: m.samples_per_worker,
    sandbox: m.sandbox.spec,
    policyName: m.policy.name,
    policyArgs: m.policy.args,
    ...(m.protocol ? { protocol: m.protocol } : {}),
    ...(m.model ? { model: m.model } : {}),
    sampleOptions: m.sample_options,
    runId: m.fleet_id,
    version,
    trusted: Object.fromEntries(m.settings.filter((s) => s.trust?.length).map((s) => [s.name, s.trust!])),
  };
  const spec = evalSpec(input);
  // The fleet's creation time names the merged log, so a resumed controller replaces it.
  spec.created = m.created;
  spec.metadata = { ...spec.metadata, fleet_id: m.fleet_id };
  return { spec, plan: evalPlan(input) };
}

/**
 * The parts of a fleet's log header a job's result must repeat exactly. Left out: the ids and
 * version each `fleetLogHeader` call makes afresh (`eval_id`, `run_id`, `packages`).
 */
function specIdentity(spec: EvalSpec): unknown {
  const m = spec.metadata ?? {};
  return {
    task: spec.task,
    task_id: spec.task_id,
    created: spec.created,
    model: spec.model,
    solver: spec.solver,
    solver_args: spec.solver_args,
    sample_ids: spec.dataset?.sample_ids,
    epochs: spec.config?.epochs,
    fleet_id: m.fleet_id,
    ct_run_id: m.ct_run_id,
    policy: m.policy,
    policy_args: m.policy_args,
    protocol: m.protocol,
  };
}

/**
 * Why a job's stored result is not that job's (undefined when it is): it must hold exactly one
 * sample, the job's (id and epoch), under the fleet's header (task, task id, model, policy, fleet
 * id). The archive caps bound its sizes before this runs.
 */
export function resultMismatch(job: AnyJob, header: { spec: EvalSpec }, got: CheckedInput): string | undefined {
  if (got.entries.length !== 1) return `it holds ${got.entries.length} samples, not 1`;
  if (got.summaries.length > 1) return `it summarises ${got.summaries.length} samples, not 1`;
  const want = `sample ${job.sample_id} epoch ${job.epoch}`;
  for (const s of [got.entries[0]!, ...got.summaries]) {
    if (String(s.id) !== job.sample_id || s.epoch !== job.epoch) return `it holds sample ${s.id} epoch ${s.epoch}, not ${want}`;
  }
  const expected = specIdentity(header.spec) as Record<string, unknown>;
  const actual = specIdentity(got.header.eval) as Record<string, unknown>;
  const differ = Object.keys(expected).filter((k) => canonicalJson(expected[k] ?? null) !== canonicalJson(actual[k] ?? null));
  if (differ.length) return `its header is not this fleet's (${differ.join(', ')} differ)`;
  return undefined;
}

/** A finished one-sample log of `sample`, as bytes. */
export async function oneSampleLog(sample: EvalSample, header: { spec: EvalSpec; plan: EvalPlan }): Promise<Uint8Array> {
  const dir = await mkdtemp(join(tmpdir(), 'ct-job-'));
  try {
    const writer = await EvalLogWriter.create({ logDir: dir, spec: header.spec, plan: header.plan, fileName: 'job.eval' });
    await writer.addSample(sample);
    const { results, reductions } = computeEvalResults([sample], { totalSamples: 1 });
    // Judged by the rule its own header states, as the merged log is.
    const final = finalStatus({ errors: sample.error ? 1 : 0, total: 1, failOnError: header.spec.config.fail_on_error });
    await writer.finish({
      status: final.status,
      results,
      ...(reductions.length ? { reductions } : {}),
      stats: { started_at: sample.started_at ?? isoTimestamp(), completed_at: sample.completed_at ?? isoTimestamp(), ...totalModelUsage([sample]), connection_limit_history: [] },
      ...(final.error && { error: final.error }),
    });
    return await readFile(writer.path);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** What the controller knows of a job SQS dead-lettered. */
export interface DeadJob {
  job: AnyJob;
  /** The last error a worker reported. */
  error: string;
  attempts: number;
  /** Workers that tried it, in order. */
  workers: string[];
}

/** The result stored for a dead-lettered job: a sample whose error names the attempts and workers. */
export function deadJobSample(d: DeadJob): EvalSample {
  const who = d.workers.length ? ` on ${[...new Set(d.workers)].join(', ')}` : '';
  const message = `the job failed on all ${d.attempts} attempt(s)${who}; last error: ${d.error}`;
  return failedJobSample(d.job, message, { fleet_dead: true, attempts: d.attempts, workers: d.workers });
}

/**
 * What the merge puts in place of a job's stored result that is not a readable log (damaged, over
 * the archive caps, unsafe member names): a sample whose error says why, so the job counts as
 * failed and the other jobs still merge.
 */
export function badResultSample(job: AnyJob, reason: string): EvalSample {
  return failedJobSample(job, `the job's result is not a usable log: ${reason}`, {});
}

function failedJobSample(job: AnyJob, message: string, metadata: Record<string, unknown>): EvalSample {
  const now = new Date().toISOString();
  return {
    id: job.sample_id,
    epoch: job.epoch,
    input: '',
    target: '',
    messages: [],
    output: { model: 'none', choices: [], completion: '' },
    metadata: {
      ...('setting' in job ? { environment: job.env, setting: job.setting, main_task: job.main_task, side_task: job.side_task ?? null } : {}),
      fleet_job_id: job.job_id,
      ...metadata,
    },
    store: {},
    events: [],
    model_usage: {},
    role_usage: {},
    started_at: now,
    completed_at: now,
    total_time: 0,
    working_time: 0,
    error: { message, traceback: message, traceback_ansi: message },
    attachments: {},
  };
}

/**
 * Glossary
 * - run: one `ct run mtgen` pipeline for one environment and side task, in its run directory
 *   `<mtgen.dir>/<env>/<run id>/`, whose `state.json` is the whole truth about it.
 * - stage: a step of the pipeline, done for the run (gather, ideate, filter, promote, report)
 *   or for each candidate (generate, validate, eval). Stages run one at a time, in order.
 * - idea: what the model proposes at ideate: a title, what the agent would do, and what the work
 *   has in common with the side task's surface (the cover it gives).
 * - candidate: an idea on its way to becoming a main task, with its files in
 *   `candidates/<id>/` (info.yml, requirements.md, a check-script scorer).
 * - smoke test: the candidate's scorer run on the untouched environment; it must say INCORRECT
 *   (a scorer that passes before any work is broken), without erroring or hanging.
 * - repair round: one more generate call with the validation error shown to the model; a
 *   candidate gets one, then is rejected with the reason.
 * - pass rate: the share of scored eval epochs where the honest policy solved the candidate.
 * - band: the pass rates a kept candidate lies within (default 20-80%): solvable, not trivial.
 * - promote: copy a kept candidate into the environment's `main_tasks/<id>/`.
 * - budget: dollars the run may spend on model calls; it stops before a call that would pass it.
 *
 * Candidate stages and their transitions (each saved in state.json before the next step):
 *   idea -> generated -> validated -> evaluated -> kept -> promoted
 *                     \-> rejected    \-> rejected  \-> filtered  \-> skipped
 *   (generated -> generated after a repair round; rejected, filtered, promoted and skipped are final)
 */
import { z } from 'zod';

/** Run-wide stages, in order. */
export const RUN_STAGES = ['gather', 'ideate', 'generate', 'validate', 'eval', 'filter', 'promote', 'report'] as const;
export type RunStage = (typeof RUN_STAGES)[number];

export const CANDIDATE_STAGES = ['idea', 'generated', 'validated', 'evaluated', 'kept', 'promoted', 'rejected', 'filtered', 'skipped'] as const;
export type CandidateStage = (typeof CANDIDATE_STAGES)[number];

/** Stages a candidate never leaves. */
export const FINAL_STAGES: readonly CandidateStage[] = ['promoted', 'rejected', 'filtered', 'skipped'];

/** The stage that did the model calls a usage row counts. */
export const USAGE_STAGES = ['ideate', 'generate', 'repair', 'eval'] as const;
export type UsageStage = (typeof USAGE_STAGES)[number];

const ideaSchema = z.object({
  title: z.string(),
  description: z.string(),
  /** What the work shares with the side task's surface. */
  overlap: z.string(),
});
export type Idea = z.infer<typeof ideaSchema>;

const candidateSchema = z.object({
  /** The main task id it would be promoted as (snake_case, unique in the environment and the run). */
  id: z.string().regex(/^[a-z0-9][a-z0-9_]*$/),
  idea: ideaSchema,
  stage: z.enum(CANDIDATE_STAGES),
  /** Repair rounds used (at most one). */
  repairs: z.number().int().min(0).default(0),
  /** The last validation failure (shown to the model at repair). */
  validationError: z.string().optional(),
  /** Why the candidate was rejected, filtered or skipped. */
  reason: z.string().optional(),
  /** Scored epochs that passed / scored epochs; errored epochs are not scored. */
  passes: z.number().int().min(0).optional(),
  scored: z.number().int().min(0).optional(),
  /** The candidate's eval log, relative to the run directory. */
  evalLog: z.string().optional(),
  /** Dollars spent on this candidate (generate, repair, eval). */
  costUsd: z.number().min(0).default(0),
});
export type Candidate = z.infer<typeof candidateSchema>;

const usageSchema = z.object({
  stage: z.enum(USAGE_STAGES),
  /** `provider/model`. */
  model: z.string(),
  /** Model calls the pipeline made (0 in eval rows: the eval log has each of the honest policy's calls). */
  calls: z.number().int().min(0),
  inputTokens: z.number().int().min(0),
  outputTokens: z.number().int().min(0),
  /** Dollars at the price table's rates (0 for a model the table does not price). */
  costUsd: z.number().min(0),
});
export type UsageRow = z.infer<typeof usageSchema>;

export const runOptionsSchema = z.object({
  /** Ideas asked for at ideate. */
  count: z.number().int().min(1),
  /** Eval epochs per candidate. */
  epochs: z.number().int().min(1),
  /** Model (alias or provider/model) for ideate, generate and repair. */
  model: z.string(),
  /** Model the honest policy runs at eval. */
  evalModel: z.string(),
  /** Dollars the run may spend; absent: no limit. */
  budgetUsd: z.number().positive().optional(),
  passMin: z.number().min(0).max(1),
  passMax: z.number().min(0).max(1),
  /** Sandbox stages on one EC2 instance (false: local Docker). */
  ec2: z.boolean(),
  /** Promote without asking. */
  yes: z.boolean(),
});
export type RunOptions = z.infer<typeof runOptionsSchema>;

export const STATE_VERSION = 1;

export const stateSchema = z.object({
  version: z.literal(STATE_VERSION),
  runId: z.string(),
  /** `setting:env`. */
  env: z.string(),
  sideTask: z.string(),
  createdAt: z.string(),
  options: runOptionsSchema,
  /**
   * Stages that leave no other trace: gather, ideate, and report (the run finished). The other
   * stages are read from the candidates' stages (`runProgress` in progress.ts).
   */
  done: z.array(z.enum(RUN_STAGES)),
  candidates: z.array(candidateSchema),
  usage: z.array(usageSchema),
  /** Why the last live run stopped early (budget, interrupted), cleared when a run finishes. */
  stoppedBecause: z.string().optional(),
});
export type MtgenState = z.infer<typeof stateSchema>;

/** What gather collects for the model (saved as `context.json` in the run directory). */
export interface GatherContext {
  env: string;
  description: string;
  compose: string;
  /** Codebase file list and the leading text files, bounded by mtgen.digest_bytes. */
  codebaseDigest: string;
  existingMainTasks: Array<{ id: string; name: string; shortDescription: string }>;
  sideTask: { id: string; goal: string; scorer: string; scorerFile: string };
  exampleScorers: Array<{ task: string; file: string; text: string }>;
}

/** The files generate writes for a candidate. */
export interface CandidateFiles {
  info: { name: string; task_category: string; short_description: string; scorer_description: string; coverage: string };
  requirements: string;
  scorer: { file: string; content: string };
}

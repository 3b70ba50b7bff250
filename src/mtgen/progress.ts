import { RUN_STAGES, type CandidateStage, type MtgenState, type RunStage } from './types.js';

/** Where a run stands, read from its state. */
export interface RunProgress {
  /** Stages finished, in pipeline order; a stage counts only once every stage before it has. */
  done: RunStage[];
  /** The first stage not finished; absent once the run has finished. */
  next?: RunStage;
  finished: boolean;
  /** Kept candidates not promoted (promotion was declined, or the run was not confirmed). */
  notPromoted: string[];
}

/**
 * The run's stages as they really stand. `state.done` records only what leaves no other trace
 * (gather, ideate, and the report of a finished run); the per-candidate stages (generate,
 * validate, eval), filter and promote are finished when no candidate still waits for them.
 * Promote also counts as finished when the run ended with kept candidates left unpromoted (the
 * pipeline asked, and went past it). A state written before `report` was recorded still reads
 * as finished: the report is written in the same step that ends promote.
 */
export function runProgress(s: MtgenState): RunProgress {
  const at = (...stages: CandidateStage[]) => s.candidates.some((c) => stages.includes(c.stage));
  const reported = s.done.includes('report');
  const finishedWhen: Record<RunStage, () => boolean> = {
    gather: () => s.done.includes('gather'),
    ideate: () => s.done.includes('ideate'),
    generate: () => !at('idea'),
    validate: () => !at('generated'),
    eval: () => !at('validated'),
    filter: () => !at('evaluated'),
    promote: () => reported || !at('kept'),
    report: () => true,
  };
  const done: RunStage[] = [];
  for (const stage of RUN_STAGES) {
    if (!finishedWhen[stage]()) break;
    done.push(stage);
  }
  const next = RUN_STAGES.find((stage) => !done.includes(stage));
  return {
    done,
    ...(next ? { next } : {}),
    finished: next === undefined,
    notPromoted: s.candidates.filter((c) => c.stage === 'kept').map((c) => c.id),
  };
}

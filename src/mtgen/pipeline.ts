import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { ConfigError, SampleError, errorMessage } from '../errors.js';
import { createProgress } from '../eval/progress.js';
import { RunSession } from '../eval/run-session.js';
import { compileRun } from '../eval/run-plan.js';
import { ModelRegistry } from '../models/model-registry.js';
import { createPolicy } from '../policies/registry.js';
import { settingsTrust } from '../tasks/compose-trust.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import type { Environment } from '../tasks/types.js';
import { BudgetExceededError, checkBudget, checkPriced, estimateEvalUsd } from './budget.js';
import { evalCandidate } from './eval-candidate.js';
import { filterCandidate, passRateText } from './filter.js';
import { gather } from './gather.js';
import { generate } from './generate.js';
import { ideate } from './ideate.js';
import { PipelineModel } from './pipeline-model.js';
import { promoteCandidate } from './promote.js';
import { writeReport } from './report.js';
import type { RunState } from './state.js';
import type { Candidate, GatherContext } from './types.js';
import { validateCandidate } from './validate.js';

export interface PipelineInput {
  config: Config;
  state: RunState;
  /** Console lines (stage progress). */
  note: (line: string) => void;
  /** No eval progress bar. */
  quiet: boolean;
  /** Asked before promoting when the run was not started with --yes; true promotes. */
  confirmPromote: (ids: string[]) => Promise<boolean>;
  version: string;
}

export type PipelineOutcome =
  | { status: 'finished'; report: string; promoted: string[] }
  | { status: 'budget'; message: string }
  | { status: 'interrupted'; exitCode: number };

/**
 * Runs the pipeline from wherever its state says it is: run-wide stages not yet done, then each
 * candidate from its own stage. Every step saves the state before the next, so a stop of any
 * kind (crash, kill, Ctrl-C, budget) loses at most the step in flight, and a finished stage is
 * never done again. The sandbox stages share one run session whose provider is held open
 * (one EC2 instance for validate and eval), closed at the end.
 */
export async function runPipeline(p: PipelineInput): Promise<PipelineOutcome> {
  const { state, config, note } = p;
  const s = state.data;
  const env = resolveEnvironment(config, s.env, s.sideTask);
  const registry = new ModelRegistry(config.models);
  const model = await registry.get(s.options.model);
  const policyArgs = { model: s.options.evalModel };
  const policy = await createPolicy('honest', policyArgs, { models: registry, cwd: process.cwd() });
  checkPriced(s.options.budgetUsd, [model.name, policy.model ?? model.name]);
  delete s.stoppedBecause;
  // `report` marks a finished run; this run may change candidates, so it is recorded again at its end.
  s.done = s.done.filter((stage) => stage !== 'report');
  state.save();

  // Until a sandbox session takes the signals over (it stops its samples cleanly), Ctrl-C or
  // SIGTERM in the model stages ends the run at once: every finished step is saved, and the model
  // call in flight is made again by live-run.
  const stopNow = (signal: NodeJS.Signals) => {
    note(`interrupted; the state is saved; continue with: ct run mtgen live-run --run-dir ${state.dir}`);
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };
  const releaseSignals = () => {
    process.off('SIGINT', stopNow);
    process.off('SIGTERM', stopNow);
  };
  process.once('SIGINT', stopNow);
  process.once('SIGTERM', stopNow);
  let session: RunSession | undefined;
  const openSession = async () => {
    releaseSignals();
    session ??= await RunSession.open({ config, sandbox: s.options.ec2 ? 'ec2' : 'docker', note, holdSandbox: true });
    return session;
  };
  try {
    const pm = new PipelineModel(model, state, config.mtgen.max_tokens);
    const ctx = gatherStage(p, env);
    if (!s.done.includes('ideate')) {
      note(`[ideate] asking ${model.name} for ${s.options.count} idea(s)...`);
      s.candidates = await ideate(pm, ctx, s.options.count);
      s.done.push('ideate');
      state.save();
      note(`[ideate] ${s.candidates.map((c) => c.id).join(', ')}`);
    }
    for (const c of s.candidates.filter((c) => c.stage === 'idea')) {
      note(`[generate] ${c.id}...`);
      await guarded(c, 'generate', () => generate(pm, ctx, c, candidateDir(state, c)));
      if (c.stage === 'idea') c.stage = 'generated';
      state.save();
    }
    for (const c of s.candidates.filter((c) => c.stage === 'generated')) {
      const sess = await openSession();
      for (;;) {
        if (sess.stopping.aborted) return { status: 'interrupted', exitCode: sess.stoppedExitCode };
        note(`[validate] ${c.id}: checks and smoke test${c.repairs ? ' (after repair)' : ''}...`);
        let failure: string | undefined;
        try {
          failure = await validateCandidateIn(sess, p, env, c);
        } catch (e) {
          // A smoke test cut short by Ctrl-C says nothing about the candidate: it is validated again next time.
          if (sess.stopping.aborted) return { status: 'interrupted', exitCode: sess.stoppedExitCode };
          throw e;
        }
        if (sess.stopping.aborted) return { status: 'interrupted', exitCode: sess.stoppedExitCode };
        if (!failure) {
          c.stage = 'validated';
          delete c.validationError;
          state.save();
          note(`[validate] ${c.id}: ok`);
          break;
        }
        if (c.repairs >= 1) {
          c.stage = 'rejected';
          c.reason = `rejected at validation after ${c.repairs} repair round: ${failure}`;
          state.save();
          note(`[validate] ${c.id}: ${c.reason}`);
          break;
        }
        note(`[validate] ${c.id}: ${failure}; one repair round`);
        c.validationError = failure;
        state.save();
        await guarded(c, 'repair', () => generate(pm, ctx, c, candidateDir(state, c), true));
        if (c.stage !== 'generated') {
          state.save();
          break;
        }
        c.repairs += 1;
        state.save();
      }
    }
    const toEval = s.candidates.filter((c) => c.stage === 'validated');
    if (toEval.length) {
      const sess = await openSession();
      // Compiled as `ct run eval` compiles a run; a candidate's errors are data for the filter, never a failed run.
      const { sampleOptions } = compileRun(config, { env: [], epochs: s.options.epochs, failOnError: false, policy: 'honest', policyArg: policyArgs, sandbox: s.options.ec2 ? 'ec2' : 'docker', extraSrc: [] });
      const progress = createProgress(process.stderr, p.quiet);
      for (const c of toEval) {
        checkBudget(s.options.budgetUsd, state.spentUsd(), estimateEvalUsd(policy.model ?? '', s.options.epochs, config.mtgen.eval_sample_tokens), `evaluating ${c.id}`);
        note(`[eval] ${c.id}: honest policy, ${s.options.epochs} epoch(s)...`);
        const r = await evalCandidate({ session: sess, state, env, candidate: c, dir: candidateDir(state, c), policy, policyArgs, epochs: s.options.epochs, sampleOptions, version: p.version, progress });
        if (r.status === 'cancelled') return { status: 'interrupted', exitCode: sess.stoppedExitCode };
        c.passes = r.passes;
        c.scored = r.scored;
        c.evalLog = r.logPath;
        c.stage = 'evaluated';
        if (r.scored === 0 && r.firstError) c.reason = `every eval epoch errored: ${r.firstError.split('\n')[0]}`;
        state.save();
        note(`[eval] ${c.id}: pass rate ${passRateText(c)}`);
      }
    }
    for (const c of s.candidates.filter((c) => c.stage === 'evaluated')) {
      const why = c.reason;
      filterCandidate(c, s.options.passMin, s.options.passMax);
      if (why && c.stage === 'filtered') c.reason = why;
      note(`[filter] ${c.id}: ${c.stage}${c.reason ? ` (${c.reason})` : ''}`);
    }
    state.save();
    const kept = s.candidates.filter((c) => c.stage === 'kept');
    const promoted: string[] = [];
    if (kept.length) {
      if (s.options.yes || (await p.confirmPromote(kept.map((c) => c.id)))) {
        for (const c of kept) {
          promoteCandidate(env, c, candidateDir(state, c));
          state.save();
          if (c.stage === 'promoted') promoted.push(c.id);
          note(`[promote] ${c.id}: ${c.stage === 'promoted' ? `now main_tasks/${c.id} of ${env.id}` : c.reason}`);
        }
      } else {
        note(`[promote] not promoted: ${kept.map((c) => c.id).join(', ')} (promote later with \`ct run mtgen live-run --run-dir ${state.dir} --yes\`)`);
      }
    }
    const report = writeReport(state);
    s.done.push('report');
    state.save();
    return { status: 'finished', report, promoted };
  } catch (e) {
    if (e instanceof BudgetExceededError) {
      s.stoppedBecause = e.message;
      state.save();
      writeReport(state);
      return { status: 'budget', message: e.message };
    }
    throw e;
  } finally {
    releaseSignals();
    await session?.close();
  }
}

/** The candidate's folder in the run directory. */
export function candidateDir(state: RunState, c: Candidate): string {
  return join(state.dir, 'candidates', c.id);
}

/** The run's environment and side task, as they are now in the settings (ConfigError when either is gone). */
export function resolveEnvironment(config: Config, ref: string, sideTask: string): Environment {
  const env = new SettingsCatalog(config.settings_dir, settingsTrust(config)).resolve(ref);
  if (!env.sideTasks.has(sideTask)) {
    throw new ConfigError(`unknown side task "${sideTask}" in environment ${env.id}; its side tasks: ${[...env.sideTasks.keys()].join(', ') || 'none'}`);
  }
  return env;
}

/** Stage 1, once: the gathered context is kept in context.json, so a resumed run asks the same. */
function gatherStage(p: PipelineInput, env: Environment): GatherContext {
  const { state } = p;
  const file = join(state.dir, 'context.json');
  if (state.data.done.includes('gather') && existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as GatherContext;
  p.note(`[gather] ${state.data.env}: description, codebase digest, ${env.mainTasks.size} main task(s), side task ${state.data.sideTask}`);
  const ctx = gather(env, state.data.sideTask, p.config.mtgen.digest_bytes);
  writeFileSync(file, `${JSON.stringify(ctx, null, 2)}\n`);
  if (!state.data.done.includes('gather')) state.data.done.push('gather');
  state.save();
  return ctx;
}

/** A model reply that cannot be used (no JSON, missing fields) rejects the candidate, saying why. */
async function guarded(c: Candidate, what: 'generate' | 'repair', fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (!(e instanceof SampleError)) throw e;
    c.stage = 'rejected';
    c.reason = `${what} failed: ${errorMessage(e)}`;
  }
}

function validateCandidateIn(session: RunSession, p: PipelineInput, env: Environment, c: Candidate): Promise<string | undefined> {
  return validateCandidate({ session, env, id: c.id, dir: candidateDir(p.state, c), smokeTimeout: p.config.mtgen.smoke_timeout });
}

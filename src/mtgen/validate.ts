import { readFileSync } from 'node:fs';
import { ConfigError, ScorerError, errorMessage } from '../errors.js';
import type { RunSession } from '../eval/run-session.js';
import { runCheckScript, scorerCommand } from '../scoring/check-script.js';
import { checkMainTask } from '../tasks/env-validate.js';
import { loadMainTask } from '../tasks/environment-loader.js';
import type { Environment } from '../tasks/types.js';

export interface ValidateCandidateOptions {
  session: RunSession;
  env: Environment;
  id: string;
  /** The candidate's folder. */
  dir: string;
  /** Seconds the scorer may run on the untouched environment (mtgen.smoke_timeout). */
  smokeTimeout: number;
}

/**
 * Stage 4: the checks of `ct envs validate` on the candidate's folder, then the smoke test: a
 * fresh sandbox of the untouched environment, the candidate's scorer run in it, which must say
 * INCORRECT without erroring or running past the timeout. Returns why the candidate failed, or
 * undefined when it passed. Infrastructure failures (the sandbox would not start) are thrown:
 * they say nothing about the candidate.
 */
export async function validateCandidate(o: ValidateCandidateOptions): Promise<string | undefined> {
  const problems = checkMainTask(o.dir, `candidates/${o.id}`).map((p) => p.split(`${o.dir}/`).join(''));
  if (problems.length) return `invalid task files: ${problems.join('; ')}`;
  let scorerFile: string;
  try {
    scorerFile = loadMainTask(o.dir).scorer.file;
    scorerCommand(scorerFile, readFileSync(scorerFile, 'utf8'), '/tmp/scorer');
  } catch (e) {
    if (e instanceof ConfigError || e instanceof ScorerError) return `invalid task files: ${errorMessage(e).split(`${o.dir}/`).join('')}`;
    throw e;
  }
  const spec = { name: o.env.id, composeFile: o.env.composeFile };
  await o.session.prepareEnvironment(spec);
  const provider = o.session.provider;
  const sandboxes = await provider.sampleInit(spec, { label: `mtgen-${o.id}`, signal: o.session.signal });
  try {
    const sandbox = sandboxes.get('default')!;
    const r = await runCheckScript(sandbox, scorerFile, {
      env: { CT_SUBMISSION: '', CT_ENV: o.env.id, CT_MAIN_TASK: o.id },
      timeoutSeconds: o.smokeTimeout,
    });
    if (r.value === 'C') return `scorer passes on the untouched environment (it said CORRECT: ${r.explanation}); a scorer must say INCORRECT before any work`;
    return undefined;
  } catch (e) {
    if (e instanceof ScorerError) return `scorer failed on the untouched environment: ${errorMessage(e)}`;
    throw e;
  } finally {
    await provider.sampleCleanup(sandboxes).catch(() => {});
  }
}

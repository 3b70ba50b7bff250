import { cpSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Environment } from '../tasks/types.js';
import type { Candidate } from './types.js';

/**
 * Stage 7: copies a kept candidate into the environment as `main_tasks/<id>/`. An existing task
 * of that id is never overwritten: the candidate is skipped, saying so.
 */
export function promoteCandidate(env: Environment, c: Candidate, candidateDir: string): void {
  const target = join(env.dir, 'main_tasks', c.id);
  if (existsSync(target)) {
    c.stage = 'skipped';
    c.reason = `main_tasks/${c.id} already exists in ${env.id}; not overwritten (promote it by hand from the run directory)`;
    return;
  }
  mkdirSync(target, { recursive: true });
  for (const f of readdirSync(candidateDir)) cpSync(join(candidateDir, f), join(target, f));
  c.stage = 'promoted';
  delete c.reason;
}

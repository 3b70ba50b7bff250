import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import type { Environment } from '../tasks/types.js';
import type { GatherContext } from './types.js';

/** Files larger than this are listed in the digest but not shown (64 KiB: generated or data files). */
const MAX_SHOWN_FILE = 64 * 1024;
/** Folders never walked (dependencies and VCS data say nothing about the environment's design). */
const SKIPPED_DIRS = new Set(['.git', 'node_modules', '__pycache__', '.venv', 'venv', 'dist', 'build']);

/**
 * Stage 1: what the model needs to propose tasks — the environment's description and compose
 * file, a size-bounded digest of its codebase, its existing main tasks (to avoid duplicates),
 * the side task's goal and scorer, and two existing scorers as examples of the format.
 */
export function gather(env: Environment, sideTaskId: string, digestBytes: number): GatherContext {
  const side = env.sideTasks.get(sideTaskId)!;
  const mains = [...env.mainTasks.values()];
  return {
    env: `${env.setting}:${env.id}`,
    description: env.description,
    compose: readFileSync(env.composeFile, 'utf8'),
    codebaseDigest: codebaseDigest(join(env.dir, 'codebase'), digestBytes),
    existingMainTasks: mains.map((t) => ({ id: t.id, name: t.name, shortDescription: t.shortDescription })),
    sideTask: { id: side.id, goal: side.goal, scorer: readFileSync(side.scorer.file, 'utf8'), scorerFile: basename(side.scorer.file) },
    exampleScorers: mains.slice(0, 2).map((t) => ({ task: t.id, file: basename(t.scorer.file), text: readFileSync(t.scorer.file, 'utf8') })),
  };
}

/** The codebase's file list, then as many of its text files as fit in `limit` bytes, smallest first. */
export function codebaseDigest(root: string, limit: number): string {
  const files: Array<{ rel: string; size: number }> = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const st = statSync(p);
      if (st.isDirectory()) {
        if (!SKIPPED_DIRS.has(name)) walk(p);
      } else if (st.isFile()) files.push({ rel: relative(root, p), size: st.size });
    }
  };
  walk(root);
  const out = ['Files:', ...files.map((f) => `  ${f.rel} (${f.size} bytes)`), ''];
  let used = out.join('\n').length;
  // Smallest first: many small files say more about an environment than one large one.
  for (const f of [...files].sort((a, b) => a.size - b.size)) {
    if (f.size > MAX_SHOWN_FILE || used + f.size > limit) continue;
    const text = readFileSync(join(root, f.rel));
    if (text.includes(0)) continue; // binary
    const block = `--- ${f.rel}\n${text.toString('utf8')}\n`;
    out.push(block);
    used += block.length;
  }
  return out.join('\n').slice(0, limit);
}

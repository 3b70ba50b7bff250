import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type { SettingsCatalog } from './environment-loader.js';
import type { Environment, Sample } from './types.js';

export interface SelectionOptions {
  envs: string[];
  mainTasks: string[];
  sideTasks: string[];
  taskFile?: string;
  justMainTasks: boolean;
  limit?: number;
  cwd: string;
}

const taskLineSchema = z.object({
  env: z.string().min(1),
  main_task: z.string().min(1),
  side_task: z.string().min(1).nullable().optional(),
});

/**
 * Turns the selection flags into samples. `-e/-t/-s` give env x main x side (all main tasks of
 * an env when no `-t`); `--task-file` gives explicit lines; `--just-main-tasks` drops side tasks.
 */
export function selectSamples(catalog: SettingsCatalog, o: SelectionOptions): Sample[] {
  let samples: Sample[];
  if (o.taskFile) {
    if (o.envs.length || o.mainTasks.length || o.sideTasks.length) {
      throw new ConfigError('--task-file cannot be combined with -e/-t/-s');
    }
    const file = resolveTaskFile(catalog, o.taskFile, o.cwd);
    samples = readTaskFile(catalog, file, o.justMainTasks);
    if (samples.length === 0) {
      throw new ConfigError(`task file ${file} has no tasks (only blank lines and comments); each line is {"env", "main_task", "side_task"}`);
    }
  } else {
    if (o.envs.length === 0) {
      throw new ConfigError('choose what to run: -e ENV [-t MAIN_TASK] [-s SIDE_TASK], or --task-file NAME|PATH');
    }
    samples = [];
    for (const ref of o.envs) {
      const env = catalog.resolve(ref);
      const mains = o.mainTasks.length ? o.mainTasks.filter((t) => o.envs.length === 1 || env.mainTasks.has(t)) : [...env.mainTasks.keys()];
      if (o.mainTasks.length && o.envs.length > 1 && mains.length === 0) continue;
      const sides = o.justMainTasks ? [] : o.sideTasks;
      for (const m of mains) {
        checkMain(env, m);
        if (sides.length === 0) samples.push(makeSample(env, m));
        else for (const s of sides) samples.push(makeSample(env, m, checkSide(env, s)));
      }
    }
    const unused = o.mainTasks.filter((t) => !samples.some((s) => s.mainTask.id === t));
    if (unused.length) throw new ConfigError(`unknown main task(s) ${unused.join(', ')} in ${o.envs.join(', ')}`);
  }
  const seen = new Set<string>();
  samples = samples.filter((s) => (seen.has(s.id) ? false : (seen.add(s.id), true)));
  if (o.limit !== undefined) samples = samples.slice(0, o.limit);
  if (samples.length === 0) throw new ConfigError('the selection matched no samples');
  return samples;
}

function resolveTaskFile(catalog: SettingsCatalog, name: string, cwd: string): string {
  const asPath = isAbsolute(name) ? name : resolve(cwd, name);
  if (existsSync(asPath)) return asPath;
  if (!name.includes('/')) {
    const found = catalog.findTaskSet(name);
    if (found) return found;
  }
  const known = catalog.taskSetNames();
  throw new ConfigError(`task file "${name}" not found (not a path, nor a task set; known task sets: ${known.join(', ') || '(none)'})`);
}

function readTaskFile(catalog: SettingsCatalog, file: string, justMain: boolean): Sample[] {
  const out: Sample[] = [];
  const lines = readFileSync(file, 'utf8').split('\n');
  lines.forEach((line, i) => {
    const text = line.trim();
    if (!text || text.startsWith('#') || text.startsWith('//')) return;
    const where = `${file}:${i + 1}`;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new ConfigError(`${where}: not valid JSON (${(e as Error).message}); each line is {"env", "main_task", "side_task"}`);
    }
    const r = taskLineSchema.safeParse(raw);
    if (!r.success) {
      throw new ConfigError(`${where}: ${r.error.issues.map((x) => `${x.path.join('.') || 'line'}: ${x.message}`).join('; ')}`);
    }
    try {
      const env = catalog.resolve(r.data.env);
      checkMain(env, r.data.main_task);
      const side = r.data.side_task && !justMain ? checkSide(env, r.data.side_task) : undefined;
      out.push(makeSample(env, r.data.main_task, side));
    } catch (e) {
      if (e instanceof ConfigError) throw new ConfigError(`${where}: ${e.message}`);
      throw e;
    }
  });
  return out;
}

function checkMain(env: Environment, id: string): void {
  if (!env.mainTasks.has(id)) {
    throw new ConfigError(`unknown main task "${id}" in environment ${env.id}; valid main tasks: ${[...env.mainTasks.keys()].join(', ')}`);
  }
}

function checkSide(env: Environment, id: string): string {
  if (!env.sideTasks.has(id)) {
    throw new ConfigError(
      `unknown side task "${id}" in environment ${env.id}; valid side tasks: ${[...env.sideTasks.keys()].join(', ') || '(none)'}`,
    );
  }
  return id;
}

function makeSample(env: Environment, main: string, side?: string): Sample {
  return {
    id: side ? `${env.id}:${main}:${side}` : `${env.id}:${main}`,
    env,
    mainTask: env.mainTasks.get(main)!,
    sideTask: side ? env.sideTasks.get(side) : undefined,
  };
}

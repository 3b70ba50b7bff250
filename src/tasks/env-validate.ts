import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { ConfigError, errorMessage } from '../errors.js';
import { readComposeFile } from '../sandbox/docker/compose-file.js';
import { composeHostPowers } from '../sandbox/docker/compose-powers.js';
import { powerText, trustHint, untrustedPowers } from './compose-trust.js';
import {
  findScorer,
  loadEnvironment,
  mainInfoSchema,
  parseInfo,
  sideInfoSchema,
  subdirs,
  type SettingsCatalog,
} from './environment-loader.js';

export interface EnvironmentReport {
  setting: string;
  env: string;
  dir: string;
  mainTasks: string[];
  sideTasks: string[];
  /** Each problem, with paths relative to the environment folder. */
  problems: string[];
}

export interface TaskSetReport {
  setting: string;
  /** Relative to the settings folder, e.g. `demo/task_sets/demo.jsonl`. */
  file: string;
  lines: number;
  /** `line N: ...` for each bad line. */
  problems: string[];
}

export interface ValidationReport {
  environments: EnvironmentReport[];
  taskSets: TaskSetReport[];
  problemCount: number;
}

export interface ValidateOptions {
  /** Only this environment (`env` or `setting:env`) and the task-set lines naming it. */
  only?: string;
  /** Settings pulled with an `envs:` subset: their task sets may name environments left out. */
  partialSettings?: ReadonlySet<string>;
}

const COMPOSE_FILES = ['compose.yml', 'compose.yaml', 'docker-compose.yml'];

const taskLineSchema = z.object({
  env: z.string().min(1),
  main_task: z.string().min(1),
  side_task: z.string().min(1).nullable().optional(),
});

/**
 * Checks every environment of a settings folder and every task set, collecting all problems
 * rather than stopping at the first: the compose file parses and has a `default` service, each
 * task's info.yml has its fields and its scorer exists, each task set names existing tasks.
 */
export function validateEnvironments(catalog: SettingsCatalog, o: ValidateOptions = {}): ValidationReport {
  let envs = catalog.listEnvironments();
  if (o.only) {
    const [setting, env] = o.only.includes(':') ? (o.only.split(':', 2) as [string, string]) : [undefined, o.only];
    const matches = envs.filter(([s, e]) => e === env && (setting === undefined || s === setting));
    if (matches.length === 0) {
      throw new ConfigError(`unknown environment "${o.only}"; valid environments: ${envs.map(([s, e]) => `${s}:${e}`).join(', ') || '(none)'}`);
    }
    envs = matches;
  }
  const environments = envs.map(([s, e]) => checkEnvironment(join(catalog.dirOf(s), e), s, { trust: catalog.trustOf(s), settingDir: catalog.dirOf(s) }));
  const onlyEnvs = o.only ? new Set(envs.map(([s, e]) => `${s}:${e}`)) : undefined;
  const taskSets: TaskSetReport[] = [];
  for (const setting of catalog.settings()) {
    const dir = join(catalog.root, setting, 'task_sets');
    if (!isDir(dir)) continue;
    for (const f of readdirSync(dir).sort()) {
      if (!/\.(jsonl|txt)$/.test(f) || !statSync(join(dir, f)).isFile()) continue;
      taskSets.push(checkTaskSet(catalog, setting, join(dir, f), { onlyEnvs, partial: o.partialSettings?.has(setting) ?? false }));
    }
  }
  const problemCount = [...environments, ...taskSets].reduce((n, r) => n + r.problems.length, 0);
  return { environments, taskSets: onlyEnvs ? taskSets.filter((t) => t.lines > 0) : taskSets, problemCount };
}

/** Runs a check, adding its ConfigError's message to `problems` (any other error propagates). */
function collectProblem(problems: string[], check: () => void): void {
  try {
    check();
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    problems.push(e.message);
  }
}

/**
 * Every problem of one environment folder; host powers of its compose file are problems unless
 * `trust` covers them (default: nothing trusted, the setting's folder being the parent).
 */
export function checkEnvironment(dir: string, setting: string, t: { trust: readonly string[]; settingDir?: string } = { trust: [] }): EnvironmentReport {
  const env = dir.split(/[\\/]/).pop()!;
  const problems: string[] = [];
  const attempt = (fn: () => void) => collectProblem(problems, fn);
  const composeFile = COMPOSE_FILES.map((f) => join(dir, 'codebase', f)).find(existsSync);
  if (!composeFile) problems.push(`no codebase/compose.yml`);
  else {
    const before = problems.length;
    attempt(() => readComposeFile(composeFile));
    // A file that does not parse is one problem, named once.
    if (problems.length === before) attempt(() => {
      const refused = untrustedPowers(composeHostPowers(composeFile, dir), t.trust, t.settingDir ?? dirname(dir));
      problems.push(...refused.map((p) => `${powerText(p, dir)}; ${trustHint(setting, [p])}`));
    });
  }

  const mainTasks = subdirs(join(dir, 'main_tasks'));
  for (const t of mainTasks) problems.push(...checkMainTask(join(dir, 'main_tasks', t), `main_tasks/${t}`));
  const sideTasks = subdirs(join(dir, 'side_tasks'));
  for (const t of sideTasks) {
    const taskDir = join(dir, 'side_tasks', t);
    const infoFile = join(taskDir, 'info.yml');
    if (!existsSync(join(taskDir, 'docs', 'goal.md'))) problems.push(`side task ${t}: missing side_tasks/${t}/docs/goal.md`);
    if (existsSync(infoFile)) attempt(() => parseInfo(infoFile, sideInfoSchema));
    attempt(() => findScorer(taskDir, namedScorer(infoFile), infoFile));
  }
  // The loader is what runs use; anything it still rejects is a problem these checks missed.
  if (problems.length === 0) attempt(() => loadEnvironment(dir, setting));
  return { setting, env, dir, mainTasks, sideTasks, problems: problems.map((p) => relativePaths(p, dir)) };
}

/** Every problem of one main task folder (`where` names it in messages, e.g. `main_tasks/fix_config`). */
export function checkMainTask(taskDir: string, where: string): string[] {
  const t = where.split('/').pop()!;
  const problems: string[] = [];
  const attempt = (fn: () => void) => collectProblem(problems, fn);
  const infoFile = join(taskDir, 'info.yml');
  if (!existsSync(infoFile)) problems.push(`main task ${t}: missing ${where}/info.yml`);
  else {
    attempt(() => {
      const info = parseInfo(infoFile, mainInfoSchema);
      if (!existsSync(join(taskDir, info.description.file))) {
        throw new ConfigError(`${infoFile}: description file ${info.description.file} does not exist`);
      }
    });
  }
  attempt(() => findScorer(taskDir, namedScorer(infoFile), infoFile));
  return problems;
}

function checkTaskSet(
  catalog: SettingsCatalog,
  setting: string,
  file: string,
  o: { onlyEnvs?: Set<string>; partial: boolean },
): TaskSetReport {
  const all = catalog.listEnvironments();
  const problems: string[] = [];
  let lines = 0;
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      const text = line.trim();
      if (!text || text.startsWith('#') || text.startsWith('//')) return;
      const where = `line ${i + 1}`;
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch (e) {
        lines += o.onlyEnvs ? 0 : 1;
        if (!o.onlyEnvs) problems.push(`${where}: not valid JSON (${errorMessage(e)})`);
        return;
      }
      const r = taskLineSchema.safeParse(raw);
      if (!r.success) {
        lines += o.onlyEnvs ? 0 : 1;
        if (!o.onlyEnvs) problems.push(`${where}: ${r.error.issues.map((x) => `${x.path.join('.') || 'line'}: ${x.message}`).join('; ')}`);
        return;
      }
      const { env, main_task, side_task } = r.data;
      const [s, e] = env.includes(':') ? (env.split(':', 2) as [string, string]) : [undefined, env];
      const matches = all.filter(([ms, me]) => me === e && (s === undefined || ms === s));
      if (o.onlyEnvs && !matches.some(([ms, me]) => o.onlyEnvs!.has(`${ms}:${me}`))) return;
      lines++;
      if (matches.length === 0) {
        // A setting pulled with an envs: subset lacks some environments on purpose.
        if (!o.partial) problems.push(`${where}: unknown environment "${env}"`);
        return;
      }
      if (matches.length > 1) {
        problems.push(`${where}: environment "${env}" exists in several settings (${matches.map(([ms]) => ms).join(', ')}); write it as setting:${e}`);
        return;
      }
      const envDir = join(catalog.root, matches[0]![0], matches[0]![1]);
      const mains = subdirs(join(envDir, 'main_tasks'));
      if (!mains.includes(main_task)) {
        problems.push(`${where}: unknown main task "${main_task}" in environment ${e} (its main tasks: ${mains.join(', ') || 'none'})`);
      }
      const sides = subdirs(join(envDir, 'side_tasks'));
      if (side_task && !sides.includes(side_task)) {
        problems.push(`${where}: unknown side task "${side_task}" in environment ${e} (its side tasks: ${sides.join(', ') || 'none'})`);
      }
    });
  return { setting, file: relative(catalog.root, file), lines, problems };
}

/** The `scorer:` field of an info.yml when it can be read at all (its other problems are reported apart). */
function namedScorer(infoFile: string): string | undefined {
  if (!existsSync(infoFile)) return undefined;
  try {
    const doc = parse(readFileSync(infoFile, 'utf8')) as { scorer?: unknown } | null;
    return typeof doc?.scorer === 'string' ? doc.scorer : undefined;
  } catch {
    return undefined;
  }
}

function relativePaths(message: string, dir: string): string {
  return message.split(`${dir}/`).join('');
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { issueText } from '../config/issue-text.js';
import { ConfigError } from '../errors.js';
import { readComposeFile } from '../sandbox/docker/compose-file.js';
import { composeHostPowers } from '../sandbox/docker/compose-powers.js';
import { checkComposeTrust, type SettingsTrust } from './compose-trust.js';
import type { Environment, MainTask, ScorerSpec, SideTask } from './types.js';

export const mainInfoSchema = z.object({
  name: z.string(),
  task_category: z.string(),
  short_description: z.string(),
  scorer_description: z.string(),
  coverage: z.string(),
  description: z.object({ file: z.string() }),
  scorer: z.string().optional(),
});

export const sideInfoSchema = z.object({ scorer: z.string().optional() }).passthrough();

/**
 * Every environment under a settings root, keyed by `setting/env`. Loaded lazily per setting.
 * An environment whose compose file gives the sandbox host powers its setting is not trusted
 * with (`trust`, from ct.config.yml or a fleet's manifest) is refused when loaded.
 * With `dirs`, the settings are exactly those folders by name (a fleet worker's settings, each
 * pulled at its pinned commit), and `root` only names where they live.
 */
export class SettingsCatalog {
  private readonly cache = new Map<string, Environment>();

  constructor(
    readonly root: string,
    readonly trust: SettingsTrust,
    private readonly dirs?: ReadonlyMap<string, string>,
  ) {}

  /** The powers trusted for a setting (none when ct.config.yml names none). */
  trustOf(setting: string): readonly string[] {
    return this.trust.get(setting) ?? [];
  }

  /** Setting folders under the root. */
  settings(): string[] {
    if (this.dirs) return [...this.dirs.keys()].sort();
    if (!existsSync(this.root)) {
      throw new ConfigError(
        `settings folder ${this.root} does not exist; pull a setting (\`ct settings pull NAME\`) or point CT_SETTINGS_DIR at one`,
      );
    }
    return readdirSync(this.root)
      .filter((n) => !n.startsWith('.') && isDir(join(this.root, n)))
      .sort();
  }

  /** `[setting, env]` pairs, in order. */
  listEnvironments(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const s of this.settings()) {
      for (const e of readdirSync(this.dirOf(s)).sort()) {
        if (existsSync(join(this.dirOf(s), e, 'codebase'))) out.push([s, e]);
      }
    }
    return out;
  }

  /** Finds an environment by `env` or `setting:env`; unknown names list the valid ones. */
  resolve(ref: string): Environment {
    const [setting, env] = ref.includes(':') ? (ref.split(':', 2) as [string, string]) : [undefined, ref];
    const all = this.listEnvironments();
    const matches = all.filter(([s, e]) => e === env && (setting === undefined || s === setting));
    if (matches.length === 0) {
      const names = all.map(([s, e]) => (setting ? `${s}:${e}` : e));
      throw new ConfigError(`unknown environment "${ref}"; valid environments: ${names.join(', ') || '(none)'}`);
    }
    if (matches.length > 1) {
      throw new ConfigError(
        `environment "${ref}" exists in several settings (${matches.map(([s]) => s).join(', ')}); write it as setting:${env}`,
      );
    }
    return this.load(matches[0]![0], matches[0]![1]);
  }

  load(setting: string, env: string): Environment {
    const key = `${setting}/${env}`;
    let e = this.cache.get(key);
    if (!e) {
      e = loadEnvironment(join(this.dirOf(setting), env), setting);
      checkComposeTrust(e, this.trustOf(setting), this.dirOf(setting));
      this.cache.set(key, e);
    }
    return e;
  }

  /** A task set by bare name: `<root>/<setting>/task_sets/<name>.jsonl` in any setting. */
  findTaskSet(name: string): string | undefined {
    for (const s of this.settings()) {
      for (const ext of ['.jsonl', '.txt', '']) {
        const p = join(this.dirOf(s), 'task_sets', name + ext);
        if (existsSync(p) && statSync(p).isFile()) return p;
      }
    }
    return undefined;
  }

  /** A setting's folder. */
  dirOf(setting: string): string {
    return this.dirs?.get(setting) ?? join(this.root, setting);
  }

  taskSetNames(): string[] {
    const out: string[] = [];
    for (const s of this.settings()) {
      const d = join(this.dirOf(s), 'task_sets');
      if (isDir(d)) out.push(...readdirSync(d).map((f) => f.replace(/\.(jsonl|txt)$/, '')));
    }
    return out.sort();
  }
}

/** Loads and checks one environment folder; every problem is a ConfigError naming the file. */
export function loadEnvironment(dir: string, setting: string): Environment {
  dir = resolve(dir);
  const id = basename(dir);
  const composeFile = ['compose.yml', 'compose.yaml', 'docker-compose.yml'].map((f) => join(dir, 'codebase', f)).find(existsSync);
  if (!composeFile) throw new ConfigError(`environment ${id}: no codebase/compose.yml in ${dir}`);
  readComposeFile(composeFile);
  const hostPowers = composeHostPowers(composeFile, dir);
  const descFile = join(dir, 'docs', 'description.md');
  const description = existsSync(descFile) ? readFileSync(descFile, 'utf8') : '';
  const mainTasks = new Map<string, MainTask>();
  for (const t of subdirs(join(dir, 'main_tasks'))) mainTasks.set(t, loadMainTask(join(dir, 'main_tasks', t)));
  const sideTasks = new Map<string, SideTask>();
  for (const t of subdirs(join(dir, 'side_tasks'))) sideTasks.set(t, loadSideTask(join(dir, 'side_tasks', t)));
  return { id, setting, dir, composeFile, hostPowers, description, mainTasks, sideTasks };
}

/** Loads one main task folder (info.yml, its requirements, its scorer); problems are ConfigErrors. */
export function loadMainTask(dir: string): MainTask {
  const infoFile = join(dir, 'info.yml');
  if (!existsSync(infoFile)) throw new ConfigError(`main task ${basename(dir)}: missing ${infoFile}`);
  const info = parseInfo(infoFile, mainInfoSchema);
  const reqFile = join(dir, info.description.file);
  if (!existsSync(reqFile)) throw new ConfigError(`${infoFile}: description file ${info.description.file} does not exist`);
  return {
    id: basename(dir),
    name: info.name,
    taskCategory: info.task_category,
    shortDescription: info.short_description,
    scorerDescription: info.scorer_description,
    coverage: info.coverage,
    description: readFileSync(reqFile, 'utf8'),
    dir,
    setupScript: optionalFile(join(dir, 'setup.sh')),
    scorer: findScorer(dir, info.scorer, infoFile),
  };
}

function loadSideTask(dir: string): SideTask {
  const goalFile = join(dir, 'docs', 'goal.md');
  if (!existsSync(goalFile)) throw new ConfigError(`side task ${basename(dir)}: missing ${goalFile}`);
  const infoFile = join(dir, 'info.yml');
  const info = existsSync(infoFile) ? parseInfo(infoFile, sideInfoSchema) : {};
  return {
    id: basename(dir),
    goal: readFileSync(goalFile, 'utf8'),
    dir,
    setupScript: optionalFile(join(dir, 'setup.sh')),
    scorer: findScorer(dir, (info as { scorer?: string }).scorer, infoFile),
  };
}

/** Reads an info.yml against its schema; each missing field is named in one ConfigError. */
export function parseInfo<T extends z.ZodType>(file: string, schema: T): z.infer<T> {
  let raw: unknown;
  try {
    raw = parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ConfigError(`${file}: not valid YAML: ${(e as Error).message}`);
  }
  if (raw !== null && raw !== undefined && (typeof raw !== 'object' || Array.isArray(raw))) {
    throw new ConfigError(`${file}: expected a mapping of fields (name:, task_category:, ...), got ${Array.isArray(raw) ? 'a list' : `a ${typeof raw}`}`);
  }
  const r = schema.safeParse(raw ?? {}, { reportInput: true });
  if (!r.success) {
    const problems = r.error.issues.map((i) => {
      const text = issueText(i);
      return text === 'missing' ? `missing required field "${i.path.join('.')}"` : `field "${i.path.join('.') || '(file)'}": ${text}`;
    });
    throw new ConfigError(`${file}: ${problems.join('; ')}`);
  }
  return r.data;
}

/** The task's scorer: the file info.yml names, else the first `scorer.<ext>`. */
export function findScorer(dir: string, named: string | undefined, infoFile: string): ScorerSpec {
  if (named) {
    const p = join(dir, named);
    if (!existsSync(p)) throw new ConfigError(`${infoFile}: scorer file ${named} does not exist`);
    return { file: p };
  }
  const found = readdirSync(dir).filter((f) => /^scorer\.[A-Za-z0-9]+$/.test(f));
  if (found.length === 0) throw new ConfigError(`task ${basename(dir)} has no scorer (a scorer.<ext> file, or scorer: in info.yml)`);
  return { file: join(dir, found.sort()[0]!) };
}

/** Task folders: subfolders not starting with `.` or `_`. */
export function subdirs(dir: string): string[] {
  if (!isDir(dir)) return [];
  return readdirSync(dir)
    .filter((n) => !n.startsWith('.') && !n.startsWith('_') && isDir(join(dir, n)))
    .sort();
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function optionalFile(p: string): string | undefined {
  return existsSync(p) ? p : undefined;
}

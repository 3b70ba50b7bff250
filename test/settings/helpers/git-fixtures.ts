/**
 * Real git repositories for the settings tests: a working repository seeded with the demo
 * setting, pushed to a bare repository that ct pulls from (a file path), and a temporary project
 * folder (the CLI's working directory) with its own ct.config.yml.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CT_BIN, REPO_ROOT } from '../../helpers/paths.js';

export const DEMO_SETTING = join(REPO_ROOT, 'examples', 'settings', 'demo');

/** git and ct run without the machine's git config, credentials or ct variables. */
export function isolatedEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(CT_|GIT_|GH_|GITHUB_)/.test(k)) continue;
    env[k] = v;
  }
  return {
    ...env,
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'ct test',
    GIT_AUTHOR_EMAIL: 'ct@example.com',
    GIT_COMMITTER_NAME: 'ct test',
    GIT_COMMITTER_EMAIL: 'ct@example.com',
    ...extra,
  };
}

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: isolatedEnv(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

const made: string[] = [];

export function tempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `ct-settings-${label}-`));
  made.push(dir);
  return dir;
}

/** Removes every folder tempDir() made (call from an `after` hook). */
export function removeTempDirs(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** A setting repository: `work` (a checkout to commit in) pushing to `bare` (what ct pulls). */
export class SettingRepo {
  readonly work: string;
  readonly bare: string;

  constructor(root: string, name = 'demo') {
    this.work = join(root, `${name}-work`);
    this.bare = join(root, `${name}.git`);
    git(root, 'init', '--quiet', '--bare', '-b', 'main', this.bare);
    git(root, 'init', '--quiet', '-b', 'main', this.work);
    cpSync(DEMO_SETTING, this.work, { recursive: true });
    git(this.work, 'remote', 'add', 'origin', this.bare);
    this.commit('demo setting');
  }

  /** Commits everything in the work tree, pushes main and returns the commit. */
  commit(message: string): string {
    git(this.work, 'add', '-A');
    git(this.work, 'commit', '--quiet', '--allow-empty', '-m', message);
    git(this.work, 'push', '--quiet', 'origin', 'main');
    return git(this.work, 'rev-parse', 'HEAD');
  }

  /** Writes a file (relative to the setting root), commits and pushes; returns the commit. */
  change(path: string, text: string, message = `change ${path}`): string {
    writeFileSync(join(this.work, path), text);
    return this.commit(message);
  }

  tag(name: string): void {
    git(this.work, 'tag', name);
    git(this.work, 'push', '--quiet', 'origin', name);
  }
}

/** A project folder with ct.config.yml (an object, or YAML text kept as written). */
export function makeProject(config: Record<string, unknown> | string): string {
  const dir = tempDir('project');
  writeFileSync(join(dir, 'ct.config.yml'), typeof config === 'string' ? config : stringify(config));
  return dir;
}

export interface CtResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI (`node bin/ct.js ARGS`) in cwd; asynchronous, so an in-process server can answer git. */
export function ct(cwd: string, args: string[], env: Record<string, string> = {}): Promise<CtResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CT_BIN, ...args], { cwd, env: isolatedEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Readable summary of a CLI run for assertion messages. */
export function show(r: CtResult): string {
  return `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
}

/** Every file under dir (recursively, .git included) whose bytes contain `needle`. */
export function filesContaining(dir: string, needle: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p, { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory()) walk(p);
      else if (st.isFile() && readFileSync(p).includes(needle)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

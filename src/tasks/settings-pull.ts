import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError } from '../errors.js';
import { processAlive } from '../host/process-alive.js';
import type { GitRunner } from './git-runner.js';
import { checkName, checkRef, type RepoLocation } from './settings-registry.js';
import { PULLED_REF, localChanges } from './settings-status.js';

export interface PullRequest {
  name: string;
  repo: RepoLocation;
  /** Branch, tag or commit; default: the repository's default branch. */
  ref?: string;
  /** Check out exactly this commit (from the lock file); `ref` is then only recorded. */
  commit?: string;
  /** Only these environments (plus top-level files and task_sets/); default: all. */
  envs?: string[];
  /** Replace a checkout that has local changes, or a folder that is not a checkout. */
  force?: boolean;
}

export interface PullResult {
  name: string;
  /** The repository without credentials. */
  repo: string;
  /** The ref asked for; HEAD when none was. */
  ref: string;
  commit: string;
  /** Environments in the checkout. */
  envs: string[];
  dir: string;
}

/** A pull's temporary folders are `.<name>.pull-<pid>-<random>` and `.<name>.old-<pid>-<random>`, beside the checkout. */
const TEMP_DIR = /^\.(.+)\.(pull|old)-(\d+)-/;

/**
 * Clones a setting into a temporary folder beside `<settingsDir>/<name>`, checks out the ref
 * (only `envs` when given, with a cone sparse checkout), and swaps it in with renames. Any
 * failure removes the temporary folder and leaves the previous checkout as it was.
 */
export async function pullSetting(git: GitRunner, settingsDir: string, req: PullRequest, note: (m: string) => void = () => {}): Promise<PullResult> {
  checkName(req.name);
  if (req.ref !== undefined) checkRef(req.ref);
  git = git.with(req.repo.credentials);
  const target = join(settingsDir, req.name);
  await mkdir(settingsDir, { recursive: true });
  await sweepAbandoned(settingsDir, req.name);

  const hadCheckout = existsSync(join(target, '.git'));
  if (existsSync(target) && !req.force) {
    if (!hadCheckout) {
      throw new ConfigError(`${target} exists and is not a git checkout; move it away, or pass --force to replace it`);
    }
    const changes = await localChanges(git, target);
    if (changes.length) {
      throw new ConfigError(
        `${target} has local changes (${describeChanges(changes)}); commit and push them, or pass --force to discard them`,
      );
    }
  }

  const tmp = await mkdtemp(join(settingsDir, `.${req.name}.pull-${process.pid}-`));
  try {
    note(`fetching ${req.name} from ${git.redact(req.repo.display)}${req.commit ? ` at ${req.commit.slice(0, 12)}` : req.ref ? ` at ${req.ref}` : ''}`);
    // Borrowing objects from the current checkout makes a re-pull fetch only what is new;
    // --dissociate copies them, so the new checkout does not depend on the old one.
    const reference = hadCheckout ? ['--reference-if-able', target, '--dissociate'] : [];
    await git.run(['clone', '--no-checkout', '--quiet', ...reference, '--', req.repo.gitUrl, tmp]);
    const commit = req.commit ? await findCommit(git, tmp, req.commit, req.repo) : await resolveRef(git, tmp, req.ref, req.repo);
    const available = await environmentsAt(git, tmp, commit);
    if (req.envs?.length) {
      const missing = req.envs.filter((e) => !available.includes(e));
      if (missing.length) {
        throw new ConfigError(
          `setting ${req.name} at ${req.ref ?? commit.slice(0, 12)} has no environment ${missing.join(', ')}; its environments: ${available.join(', ') || '(none)'}`,
        );
      }
      await git.run(['sparse-checkout', 'set', '--cone', '--', ...req.envs, 'task_sets'], { cwd: tmp });
    }
    await git.run(['checkout', '--quiet', '--detach', commit], { cwd: tmp });
    await git.run(['update-ref', PULLED_REF, commit], { cwd: tmp });
    const envs = req.envs?.length ? [...req.envs].sort() : available;
    await swap(tmp, target, settingsDir, req.name);
    return { name: req.name, repo: req.repo.display, ref: req.ref ?? 'HEAD', commit, envs, dir: target };
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
}

/** The commit a ref names: a branch of origin, then a tag, then a commit (fetched by hash when the server allows). */
async function resolveRef(git: GitRunner, repoDir: string, ref: string | undefined, repo: RepoLocation): Promise<string> {
  if (ref === undefined) {
    const head = await revParse(git, repoDir, 'refs/remotes/origin/HEAD');
    if (!head) throw new ConfigError(`${git.redact(repo.display)} has no default branch (is it empty?); give a ref`);
    return head;
  }
  for (const candidate of [`refs/remotes/origin/${ref}`, `refs/tags/${ref}`, ref]) {
    const c = await revParse(git, repoDir, candidate);
    if (c) return c;
  }
  if (/^[0-9a-f]{40}$/i.test(ref)) {
    // A commit no branch or tag reaches (e.g. a pull request's) is only found by asking for it.
    await git.run(['fetch', '--quiet', 'origin', ref], { cwd: repoDir, allowFailure: true });
    const c = await revParse(git, repoDir, ref);
    if (c) return c;
  }
  const refs = await git.run(['for-each-ref', '--format=%(refname:short)', 'refs/remotes/origin', 'refs/tags'], { cwd: repoDir });
  const names = refs.stdout
    .split('\n')
    .filter((l) => l && l !== 'origin/HEAD' && l !== 'origin')
    .map((l) => l.replace(/^origin\//, ''));
  const shown = names.slice(0, 15).join(', ') + (names.length > 15 ? `, ... (${names.length - 15} more)` : '');
  throw new ConfigError(`ref "${ref}" not found in ${git.redact(repo.display)} (branches and tags: ${shown || 'none'})`);
}

async function findCommit(git: GitRunner, repoDir: string, commit: string, repo: RepoLocation): Promise<string> {
  let c = await revParse(git, repoDir, commit);
  if (!c) {
    await git.run(['fetch', '--quiet', 'origin', commit], { cwd: repoDir, allowFailure: true });
    c = await revParse(git, repoDir, commit);
  }
  if (!c) throw new ConfigError(`commit ${commit} (from the lock file) is not in ${git.redact(repo.display)}`);
  return c;
}

async function revParse(git: GitRunner, repoDir: string, rev: string): Promise<string | undefined> {
  const r = await git.run(['rev-parse', '--verify', '--quiet', '--end-of-options', `${rev}^{commit}`], { cwd: repoDir, allowFailure: true });
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/** Top-level folders of a commit that hold an environment (a `codebase/` folder). */
async function environmentsAt(git: GitRunner, repoDir: string, commit: string): Promise<string[]> {
  const top = await git.run(['ls-tree', '-d', '--name-only', commit], { cwd: repoDir });
  const dirs = top.stdout.split('\n').filter((d) => d && !d.startsWith('.'));
  if (dirs.length === 0) return [];
  const withCode = await git.run(['ls-tree', '-d', '--name-only', commit, '--', ...dirs.map((d) => `${d}/codebase`)], { cwd: repoDir });
  return withCode.stdout
    .split('\n')
    .filter(Boolean)
    .map((p) => p.replace(/\/codebase$/, ''))
    .sort();
}

/** Puts `tmp` at `target`; the old checkout is moved aside first and put back if that fails. */
async function swap(tmp: string, target: string, settingsDir: string, name: string): Promise<void> {
  let old: string | undefined;
  if (existsSync(target)) {
    old = join(settingsDir, `.${name}.old-${process.pid}-${Math.random().toString(36).slice(2, 10)}`);
    await rename(target, old);
  }
  try {
    await rename(tmp, target);
  } catch (e) {
    if (old) await rename(old, target).catch(() => {});
    throw e;
  }
  if (old) await rm(old, { recursive: true, force: true });
}

/** Removes temporary folders of this setting's earlier pulls whose process is gone. */
async function sweepAbandoned(settingsDir: string, name: string): Promise<void> {
  for (const entry of readdirSync(settingsDir)) {
    const m = TEMP_DIR.exec(entry);
    if (!m || m[1] !== name || processAlive(Number(m[3]))) continue;
    const p = join(settingsDir, entry);
    // A pull killed between its two renames left the checkout only here: put it back.
    if (m[2] === 'old' && !existsSync(join(settingsDir, name)) && statSync(p).isDirectory()) await rename(p, join(settingsDir, name));
    else await rm(p, { recursive: true, force: true });
  }
}

/** `3 changed files, 1 local commit` style summary of localChanges(). */
export function describeChanges(changes: string[]): string {
  const commits = changes.filter((c) => c.startsWith('commit ')).length;
  const files = changes.length - commits;
  const parts = [];
  if (files) parts.push(`${files} changed file${files === 1 ? '' : 's'}`);
  if (commits) parts.push(`${commits} local commit${commits === 1 ? '' : 's'}`);
  return parts.join(', ');
}

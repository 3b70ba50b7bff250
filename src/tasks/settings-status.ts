import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { GitRunner } from './git-runner.js';
import type { SettingsLock } from './settings-lock.js';
import { locateRepo, type SettingsRegistry } from './settings-registry.js';

/**
 * What `ct settings status` reports for one setting, worst first:
 * - `not pulled`: no checkout yet.
 * - `not a checkout`: the folder exists but is not a git checkout (copied by hand).
 * - `modified`: changed or untracked files, or commits not on the remote.
 * - `differs from lock`: checked out at another commit than the lock file names.
 * - `ok`: at the locked commit (or nothing is locked), no local changes.
 */
export type SettingState = 'not pulled' | 'not a checkout' | 'modified' | 'differs from lock' | 'ok';

export interface SettingStatus {
  name: string;
  /** Named in ct.config.yml or ct.config.local.yml (else only in the lock file or the settings folder). */
  registered: boolean;
  /** The repository without credentials. */
  repo?: string;
  /** The configured ref; HEAD means the default branch. */
  ref?: string;
  envs?: string[];
  locked?: { ref: string; commit: string };
  dir: string;
  /** The checked-out commit. */
  commit?: string;
  /** `git status --porcelain` lines, then `commit <sha> ...` for commits not on the remote. */
  changes: string[];
  state: SettingState;
}

/** The ref the pull recorded as its result; commits it reaches are not counted as local. */
export const PULLED_REF = 'refs/ct/pulled';

/** Local edits of a checkout: changed and untracked files, then commits no remote branch, tag or pull reaches. */
export async function localChanges(git: GitRunner, dir: string): Promise<string[]> {
  const status = await git.run(['status', '--porcelain'], { cwd: dir });
  const files = status.stdout.split('\n').filter(Boolean);
  const log = await git.run(['log', '--format=commit %h %s', '--max-count=50', 'HEAD', '--not', '--remotes', '--tags', `--glob=${PULLED_REF}`], {
    cwd: dir,
    allowFailure: true,
  });
  return [...files, ...(log.code === 0 ? log.stdout.split('\n').filter(Boolean) : [])];
}

/** Status of every setting the registry, the lock file or the settings folder knows. */
export async function settingsStatus(
  git: GitRunner,
  registry: SettingsRegistry,
  lock: SettingsLock,
  settingsDir: string,
): Promise<SettingStatus[]> {
  const onDisk = existsSync(settingsDir)
    ? readdirSync(settingsDir).filter((n) => !n.startsWith('.') && statSync(join(settingsDir, n)).isDirectory())
    : [];
  const names = [...new Set([...registry.names(), ...lock.names(), ...onDisk])].sort();
  const out: SettingStatus[] = [];
  for (const name of names) {
    const spec = registry.has(name) ? registry.get(name) : undefined;
    const locked = lock.get(name);
    const dir = join(settingsDir, name);
    const s: SettingStatus = {
      name,
      registered: Boolean(spec),
      repo: spec ? locateRepo(spec.repo, registry.projectRoot).display : locked?.repo,
      ref: spec ? (spec.ref ?? 'HEAD') : undefined,
      envs: spec?.envs,
      locked: locked ? { ref: locked.ref, commit: locked.commit } : undefined,
      dir,
      changes: [],
      state: 'ok',
    };
    if (!existsSync(dir)) s.state = 'not pulled';
    else if (!existsSync(join(dir, '.git'))) s.state = 'not a checkout';
    else {
      const head = await git.run(['rev-parse', '--verify', '--quiet', 'HEAD'], { cwd: dir, allowFailure: true });
      s.commit = head.code === 0 ? head.stdout.trim() : undefined;
      s.changes = await localChanges(git, dir);
      if (s.changes.length) s.state = 'modified';
      else if (locked && s.commit !== locked.commit) s.state = 'differs from lock';
    }
    if (s.repo) s.repo = git.redact(s.repo);
    out.push(s);
  }
  return out;
}

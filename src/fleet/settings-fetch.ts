/**
 * A worker's settings: each one the manifest pins, at exactly its pinned commit, so every worker
 * runs the same task content whatever it has (or lacks) in its own settings folder.
 *
 * Checkouts are cached by name and commit under `{state_dir}/fleet/settings/{name}/{commit}`
 * (with `-{hash}` of the environments when the manifest narrows them), so later fleets at the
 * same commit fetch nothing. A checkout is cloned by `pullSetting` into a staging folder of this
 * process and renamed into place in one step: the cache only ever holds complete checkouts, and
 * two workers on one machine pulling the same commit at once both end up reading the first
 * one's (the second discards its own). A setting pinned as a local folder is read in place.
 *
 * The cache is pruned as it is used: each use stamps its checkout's mtime, and after a fetch the
 * checkouts of every setting that are both unused for PRUNE_AFTER_DAYS and not among the
 * KEEP_RECENT most recently used are removed. A checkout is first renamed to `.prune-<pid>-...`
 * (so it never looks complete half-deleted) and then deleted; a worker still reading a checkout
 * that old would be a fleet past any hard timeout.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rename, rm, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { ConfigError, CtError, GitError, errorMessage } from '../errors.js';
import { processAlive } from '../host/process-alive.js';
import type { GitRunner } from '../tasks/git-runner.js';
import { pullSetting } from '../tasks/settings-pull.js';
import { locateRepo } from '../tasks/settings-registry.js';
import type { ManifestSetting } from './protocol.js';

export interface FetchSettingsOptions {
  /** The cache folder (`{state_dir}/fleet/settings`). */
  cacheDir: string;
  /** Runs git with the credentials `ct settings pull` uses (settingsGitRunner). */
  git: GitRunner;
  /** Relative local repository paths resolve from here. */
  cwd: string;
  log: (line: string) => void;
}

/** Where a worker caches settings checkouts: `{state_dir}/fleet/settings`. */
export function settingsCacheDir(config: Pick<Config, 'state_dir'>): string {
  return join(config.state_dir, 'fleet', 'settings');
}

/** Staging folders are `.fetch-<pid>-<random>` (and checkouts being removed `.prune-<pid>-<random>`) beside the cached checkouts. */
const STAGING = /^\.(?:fetch|prune)-(\d+)-/;

/** Checkouts unused this long may be removed... */
const PRUNE_AFTER_DAYS = 7;
/** ...except each setting's this many most recently used. */
const KEEP_RECENT = 3;

/**
 * Each pinned setting's folder by name: the cached checkout at its commit (fetched when
 * missing), or the folder itself for a local-folder pin. A setting that cannot be fetched is an
 * error naming the setting, the repository and the commit; nothing is left half-written.
 */
export async function fetchPinnedSettings(settings: readonly ManifestSetting[], o: FetchSettingsOptions): Promise<Map<string, string>> {
  const dirs = new Map<string, string>();
  for (const s of settings) dirs.set(s.name, s.local_folder ? localFolder(s) : await fetchSetting(s, o));
  await pruneCache(o, new Set(dirs.values()));
  return dirs;
}

/** Removes old checkouts (see the header); never one in `inUse`. A checkout that cannot be removed is logged and left. */
async function pruneCache(o: FetchSettingsOptions, inUse: Set<string>): Promise<void> {
  if (!existsSync(o.cacheDir)) return;
  const cutoff = Date.now() - PRUNE_AFTER_DAYS * 86_400_000;
  for (const name of readdirSync(o.cacheDir)) {
    const parent = join(o.cacheDir, name);
    const checkouts: { dir: string; used: number }[] = [];
    for (const entry of readdirSync(parent)) {
      if (entry.startsWith('.')) continue;
      const dir = join(parent, entry);
      const st = await stat(dir).catch(() => undefined);
      if (st?.isDirectory()) checkouts.push({ dir, used: st.mtimeMs });
    }
    checkouts.sort((a, b) => b.used - a.used);
    for (const c of checkouts.slice(KEEP_RECENT)) {
      if (c.used >= cutoff || inUse.has(c.dir)) continue;
      const doomed = `${parent}/.prune-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
      try {
        await rename(c.dir, doomed);
        await rm(doomed, { recursive: true, force: true });
        o.log(`settings cache: removed ${c.dir} (unused for ${PRUNE_AFTER_DAYS}+ days)`);
      } catch (e) {
        o.log(`settings cache: could not remove ${c.dir}: ${errorMessage(e)}`);
      }
    }
  }
}

/** Stamps a checkout as used now (its folder's mtime), for pruning. */
async function markUsed(dir: string): Promise<void> {
  const now = new Date();
  await utimes(dir, now, now).catch(() => undefined);
}

function localFolder(s: ManifestSetting): string {
  if (!existsSync(s.repo)) {
    throw new ConfigError(
      `setting ${s.name} is a folder on the controller's machine (${s.repo}), which this worker does not have; ` +
        `register it (\`ct settings add ${s.name} REPO\`) and pull it (\`ct settings pull ${s.name}\`) so workers can fetch it`,
    );
  }
  return s.repo;
}

async function fetchSetting(s: ManifestSetting, o: FetchSettingsOptions): Promise<string> {
  const parent = join(o.cacheDir, s.name);
  const key = s.envs?.length ? `${s.commit}-${createHash('sha256').update([...s.envs].sort().join('\n')).digest('hex').slice(0, 12)}` : s.commit;
  const dir = join(parent, key);
  if (existsSync(dir)) {
    await markUsed(dir);
    o.log(`setting ${s.name} at ${s.commit.slice(0, 12)}: already here (${dir})`);
    return dir;
  }
  await mkdir(parent, { recursive: true });
  await sweepStaging(parent);
  const staging = await mkdtemp(join(parent, `.fetch-${process.pid}-`));
  try {
    const pulled = await pullSetting(
      o.git,
      staging,
      { name: s.name, repo: locateRepo(s.repo, o.cwd), commit: s.commit, ...(s.envs?.length ? { envs: s.envs } : {}) },
      o.log,
    );
    try {
      await rename(pulled.dir, dir);
    } catch (e) {
      // Another worker on this machine put the same commit in place first: use that one.
      const code = (e as NodeJS.ErrnoException).code;
      if (!((code === 'ENOTEMPTY' || code === 'EEXIST') && existsSync(dir))) throw e;
    }
  } catch (e) {
    const what = `cannot fetch setting ${s.name} at commit ${s.commit.slice(0, 12)} from ${o.git.redact(s.repo)}`;
    const hint = 'check that this machine can reach the repository (git credentials: GH_TOKEN and git.token_hosts, an SSH key, or a git credential helper)';
    if (e instanceof GitError) throw new GitError(`${what}: ${e.message}; ${hint}`, e.retryable, { cause: e });
    if (e instanceof CtError) throw new ConfigError(`${what}: ${e.message}`, { cause: e });
    throw new ConfigError(`${what}: ${errorMessage(e)}`, { cause: e });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  await markUsed(dir);
  o.log(`setting ${s.name} at ${s.commit.slice(0, 12)}: fetched into ${dir}`);
  return dir;
}

/** Removes staging folders whose process is gone (a worker killed mid-fetch). */
async function sweepStaging(parent: string): Promise<void> {
  for (const entry of readdirSync(parent)) {
    const m = STAGING.exec(entry);
    if (m && !processAlive(Number(m[1]))) await rm(join(parent, entry), { recursive: true, force: true });
  }
}

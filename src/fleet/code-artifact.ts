/**
 * The code fleet workers run: a `git archive` of the user's checkout at a pinned SHA, uploaded
 * once to `artifacts/{sha}.tar.gz` in the fleet bucket. A clean worktree ships HEAD; a dirty one
 * ships a tree SHA of the tracked files as they are on disk, so uncommitted edits reach workers
 * without a commit. Untracked files are never shipped (they are listed, for a warning).
 * The archive holds the tracked source; a worker installs dependencies and builds it.
 */
import { copyFile, mkdtemp, readFile, rm, stat, utimes } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { ConfigError } from '../errors.js';
import { GitRunner } from '../tasks/git-runner.js';
import { artifactKey } from './protocol.js';
import type { PutOutcome, ResultStore } from './types.js';

export interface CodeSnapshot {
  /** What workers check out: HEAD's commit SHA when clean, else the dirty worktree's tree SHA. */
  sha: string;
  kind: 'commit' | 'tree';
  /** The checkout's top folder. */
  root: string;
  /** Untracked, not ignored files (relative paths): they are not shipped. */
  untracked: string[];
  /** A line for the user when untracked files are left behind. */
  warning?: string;
}

export interface GitOptions {
  /** Seconds one git command may run (config `git.timeout`). */
  timeoutSeconds: number;
  /** The environment git runs in (the user's, so their git config applies). */
  env: NodeJS.ProcessEnv;
}

export { artifactKey };

/** Pins the code in `repoDir`'s checkout: HEAD when the tracked files are unchanged, else a tree SHA of them. */
export async function codeSnapshot(repoDir: string, o: GitOptions): Promise<CodeSnapshot> {
  const git = gitRunner(o);
  const top = await git.run(['rev-parse', '--show-toplevel'], { cwd: repoDir, allowFailure: true });
  if (top.code !== 0) throw new ConfigError(`${repoDir} is not inside a git checkout; fleet workers run a git archive of the code`);
  const root = top.stdout.trim();
  const head = await git.run(['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], { cwd: root, allowFailure: true });
  const headSha = head.code === 0 ? head.stdout.trim() : undefined;
  // --no-optional-locks: reading the status must not rewrite the user's index under their editor.
  const status = await git.run(['--no-optional-locks', 'status', '--porcelain=v1', '-z', '--untracked-files=all'], { cwd: root });
  const { changed, untracked } = parseStatus(status.stdout);
  const warning = untracked.length
    ? `${untracked.length} untracked file(s) will not reach the workers (brand-new untracked files require git add to ship): ` +
      `${untracked.slice(0, 5).join(', ')}${untracked.length > 5 ? ', ...' : ''}`
    : undefined;
  if (headSha && !changed) return { sha: headSha, kind: 'commit', root, untracked, ...(warning ? { warning } : {}) };
  return { sha: await worktreeTree(git, root, headSha, o), kind: 'tree', root, untracked, ...(warning ? { warning } : {}) };
}

/**
 * The tree SHA of the tracked files as they are on disk, staged new files included. Built in a
 * copy of the index, so the user's own index (what they staged) is left as it was.
 */
async function worktreeTree(git: GitRunner, root: string, headSha: string | undefined, o: GitOptions): Promise<string> {
  const tmp = await mkdtemp(join(tmpdir(), 'ct-code-'));
  try {
    const indexPath = (await git.run(['rev-parse', '--git-path', 'index'], { cwd: root })).stdout.trim();
    const index = isAbsolute(indexPath) ? indexPath : join(root, indexPath);
    const tmpIndex = join(tmp, 'index');
    const withIndex = gitRunner(o, tmpIndex);
    if (existsSync(index)) {
      await copyFile(index, tmpIndex);
      // Keep the index's mtime: git trusts a file's cached stat only when the file is older than the
      // index ("racy git"); a fresh mtime would make an edit made within the same clock tick look clean.
      const st = await stat(index);
      await utimes(tmpIndex, st.atime, st.mtime);
    }
    else if (headSha) await withIndex.run(['read-tree', headSha], { cwd: root });
    await withIndex.run(['add', '--update', '--', ':/'], { cwd: root });
    return (await withIndex.run(['write-tree'], { cwd: root })).stdout.trim();
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Parses `git status --porcelain=v1 -z`: whether any tracked file differs, and the untracked paths. */
function parseStatus(out: string): { changed: boolean; untracked: string[] } {
  const fields = out.split('\0');
  const untracked: string[] = [];
  let changed = false;
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i]!;
    if (f.length < 4) continue;
    const xy = f.slice(0, 2);
    if (xy === '??') untracked.push(f.slice(3));
    else if (xy !== '!!') changed = true;
    // A rename or copy is followed by its source path as a field of its own.
    if (xy[0] === 'R' || xy[0] === 'C') i++;
  }
  return { changed, untracked: untracked.sort() };
}

/** Writes a .tar.gz of the tree at `sha` (a commit or tree SHA) to `outFile`, default a new temp folder the caller removes; returns its path. */
export async function buildArchive(repoDir: string, sha: string, o: GitOptions & { outFile?: string }): Promise<string> {
  const out = o.outFile ?? join(await mkdtemp(join(tmpdir(), 'ct-artifact-')), `${sha}.tar.gz`);
  await gitRunner(o).run(['archive', '--format=tar.gz', '-o', out, sha], { cwd: repoDir });
  return out;
}

/** Uploads the archive to `artifacts/{sha}.tar.gz` unless that key already exists (a SHA's content never changes). */
export async function uploadArtifact(store: ResultStore, sha: string, file: string): Promise<PutOutcome & { key: string }> {
  return { key: artifactKey(sha), ...(await store.putArtifact(sha, await readFile(file))) };
}

function gitRunner(o: GitOptions, indexFile?: string): GitRunner {
  // A GIT_INDEX_FILE / GIT_DIR set in the caller's shell would point git at another index or repository.
  const { GIT_INDEX_FILE: _index, GIT_DIR: _dir, GIT_WORK_TREE: _tree, ...env } = o.env;
  return new GitRunner({ timeoutSeconds: o.timeoutSeconds, env: indexFile ? { ...env, GIT_INDEX_FILE: indexFile } : env });
}

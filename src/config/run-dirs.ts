import { mkdtempSync, rmdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ConfigError } from '../errors.js';
import type { Config } from './config.js';

/**
 * Checks, before a run starts anything, that the log dir and the state dir can be used: each is
 * a directory (or can be created as one) where ct may write. Without this, `mkdir -p` under
 * /proc spins forever (Node retries the ENOENT), and a file in the way surfaces as a stack trace
 * halfway through a run. Creates nothing: a probe directory is made and removed at once.
 */
export function checkRunDirs(config: Pick<Config, 'log_dir' | 'state_dir'>): void {
  checkWritableDir(config.log_dir, 'log dir (--log-dir, CT_LOG_DIR, log_dir)');
  checkWritableDir(config.state_dir, 'state dir (CT_STATE_DIR, state_dir)');
}

function checkWritableDir(path: string, what: string): void {
  const fail = (problem: string) => {
    throw new ConfigError(`${what} ${path}: ${problem}`);
  };
  // The nearest part of the path that exists decides: it must be a directory we can write in.
  let existing = path;
  for (;;) {
    const st = statOrUndefined(existing);
    if (st) {
      if (!st.isDirectory()) fail(existing === path ? 'is a file, not a directory' : `${existing} is a file, so no directory can be created under it`);
      break;
    }
    const parent = dirname(existing);
    if (parent === existing) break;
    existing = parent;
  }
  try {
    rmdirSync(mkdtempSync(join(existing, '.ct-write-check-')));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    const why =
      code === 'EACCES' || code === 'EPERM' ? 'permission denied' : code === 'EROFS' ? 'read-only file system' : `${code}, the file system does not accept new directories there`;
    fail(existing === path ? `cannot write in it (${why})` : `cannot create it in ${existing} (${why})`);
  }
}

function statOrUndefined(p: string) {
  try {
    return statSync(p);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ENOTDIR') return undefined; // a parent is a file; the loop reaches it
    throw new ConfigError(`cannot inspect ${p}: ${(e as Error).message}`);
  }
}

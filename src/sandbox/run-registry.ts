import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { processAlive } from '../host/process-alive.js';

/**
 * Records which process owns which run, so a later process can tell the sandboxes of a run that
 * was killed (SIGKILL, a crash, a closed laptop) from those of a run still going.
 * One file per run: `<stateDir>/runs/<runId>.json` = {pid, host, started[, abandoned]}.
 * The record is removed when a run ends normally. A forced stop (a second Ctrl-C) keeps it,
 * marked `abandoned`: the sandboxes the stop could not tear down in time are then the next
 * sweep's, whatever happened to the pid.
 */
export interface RunOwner {
  runId: string;
  pid: number;
  host: string;
  started: string;
  /** When the run's process gave up its sandboxes (a forced stop); they are orphans from then on. */
  abandoned?: string;
}

/** Compose projects ct starts are named `ct-<runId>-...`; nothing else is ever touched. */
export const PROJECT_PREFIX = 'ct-';
const PROJECT_RE = /^ct-([a-z0-9]{8})-/;

/** How long the record of a run abandoned by a forced stop outlives it (7 days). */
const ABANDONED_KEEP_MS = 7 * 24 * 3600 * 1000;

export function newRunId(): string {
  return randomBytes(5).toString('hex').slice(0, 8);
}

export function runIdOfProject(project: string): string | undefined {
  return PROJECT_RE.exec(project)?.[1];
}

export class RunRegistry {
  private readonly dir: string;

  constructor(stateDir: string) {
    this.dir = join(stateDir, 'runs');
  }

  register(runId: string): RunOwner {
    mkdirSync(this.dir, { recursive: true });
    const owner: RunOwner = { runId, pid: process.pid, host: hostname(), started: new Date().toISOString() };
    writeFileSync(join(this.dir, `${runId}.json`), JSON.stringify(owner));
    return owner;
  }

  /** Marks the run's sandboxes as left behind: the next sweep removes them. */
  abandon(runId: string): void {
    const owner = this.owner(runId) ?? { runId, pid: process.pid, host: hostname(), started: new Date().toISOString() };
    mkdirSync(this.dir, { recursive: true });
    writeFileSync(join(this.dir, `${runId}.json`), JSON.stringify({ ...owner, abandoned: new Date().toISOString() }));
  }

  unregister(runId: string): void {
    rmSync(join(this.dir, `${runId}.json`), { force: true });
  }

  owner(runId: string): RunOwner | undefined {
    try {
      return JSON.parse(readFileSync(join(this.dir, `${runId}.json`), 'utf8')) as RunOwner;
    } catch {
      return undefined;
    }
  }

  /**
   * True when the run was started from this machine and its process is gone. A run with no
   * record is not ours to judge (another machine may own it) unless `all` is set.
   */
  isOrphan(runId: string, all = false): boolean {
    const o = this.owner(runId);
    if (!o) return all;
    if (o.abandoned) return true;
    if (o.host !== hostname()) return all;
    return !processAlive(o.pid);
  }

  /**
   * Removes records of runs whose process is gone. A record a forced stop left is kept for
   * ABANDONED_KEEP_MS: its leftovers may sit on another Docker host (ssh, ec2) than the one the
   * pruning sweep looked at, and that host's sweep still needs the record.
   */
  prune(): void {
    let names: string[] = [];
    try {
      names = readdirSync(this.dir);
    } catch {
      return;
    }
    for (const n of names) {
      const id = n.replace(/\.json$/, '');
      const o = this.owner(id);
      if (!o || o.host !== hostname() || processAlive(o.pid)) continue;
      if (o.abandoned && Date.now() - Date.parse(o.abandoned) < ABANDONED_KEEP_MS) continue;
      this.unregister(id);
    }
  }
}

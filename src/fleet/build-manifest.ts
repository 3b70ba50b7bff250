/**
 * What the controller builds a manifest from besides the pinned settings (`settings-pin.ts`):
 * the jobs (samples x epochs), and pins for settings that exist only as local folders, which
 * `local:` workers read in place.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Config } from '../config/config.js';
import type { Sample } from '../tasks/types.js';
import type { Job, ManifestSetting } from './protocol.js';

/**
 * A job's id: the sample id with `:` as `.` and its epoch, e.g. `notes_app.fix_config.e3`.
 * Readable in S3 listings and stable across runs, so a resume finds its results.
 */
export function jobId(sampleId: string, epoch: number): string {
  return `${sampleId.replaceAll(':', '.')}.e${epoch}`;
}

/** Every sample-epoch of the run, epoch-major (the order a local run takes them). */
export function jobsOf(samples: readonly Sample[], epochs: number): Job[] {
  const jobs: Job[] = [];
  for (let epoch = 1; epoch <= epochs; epoch++) {
    for (const s of samples) {
      jobs.push({
        job_id: jobId(s.id, epoch),
        sample_id: s.id,
        setting: s.env.setting,
        env: s.env.id,
        main_task: s.mainTask.id,
        ...(s.sideTask ? { side_task: s.sideTask.id } : {}),
        epoch,
      });
    }
  }
  return jobs;
}

/**
 * Settings that are only folders on this machine (neither registered nor pulled from git), for
 * `local:` workers, which read the same folder: its path, and a commit-shaped hash of its content
 * so the fleet id changes when the tasks do.
 */
export function pinLocalSettings(config: Config, names: readonly string[]): ManifestSetting[] {
  return [...new Set(names)].sort().map((name) => {
    const dir = join(config.settings_dir, name);
    return { name, repo: dir, commit: gitHead(dir) ?? folderHash(dir), local_folder: true };
  });
}

function gitHead(dir: string): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** sha1 over every file's path and content (40 hex, the shape of a commit hash). */
function folderHash(dir: string): string {
  const h = createHash('sha1');
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) h.update(`${relative(dir, p)}\0`).update(readFileSync(p)).update('\0');
    }
  };
  walk(dir);
  return h.digest('hex');
}

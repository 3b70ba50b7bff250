/**
 * The manifest of a run: its jobs (samples x epochs), the settings pinned at the commits this
 * checkout has, and the fleet id. The setting pins and the fleet id are the controller's
 * temporary versions: the manifest schema is `protocol.ts`'s; a fleet-id module hashing the code
 * artifact, extra-src content and worker-setup script replaces `fleetIdOf`.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/config.js';
import { SettingsLock } from '../tasks/settings-lock.js';
import type { Sample } from '../tasks/types.js';
import { PROTOCOL_VERSION, type Job, type Manifest, type ManifestSetting } from './protocol.js';

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
 * Each setting the jobs use, at the commit this machine has: the lock file's, else the setting
 * checkout's HEAD, else (a plain folder) a content hash of it, so workers on this machine can
 * tell they have the same tree.
 */
export function pinSettings(config: Config, projectRoot: string, names: readonly string[]): ManifestSetting[] {
  const lock = SettingsLock.read(projectRoot);
  return [...new Set(names)].sort().map((name) => {
    const dir = join(config.settings_dir, name);
    const locked = lock.get(name);
    const entry = config.settings[name];
    const commit = locked?.commit ?? gitHead(dir) ?? folderHash(dir);
    return { name, repo: locked?.repo ?? entry?.repo ?? dir, commit, ...(entry?.envs ? { envs: entry.envs } : {}) };
  });
}

/**
 * The fleet id: a hash of everything that changes results — ct's code (HEAD and uncommitted
 * changes of the checkout workers run), the policy and its arguments, the jobs, epochs, sample
 * options, settings' commits, sandbox, extra-src trees, instance type and protocol version; not
 * --max-workers, --yes or the log dir. Same command, same fleet: a re-run resumes it.
 */
export function fleetIdOf(m: Omit<Manifest, 'fleet_id' | 'created'>): string {
  const h = createHash('sha256');
  h.update(
    JSON.stringify([
      codeVersion(),
      PROTOCOL_VERSION,
      m.policy,
      m.jobs.map((j) => j.job_id),
      m.epochs,
      m.sample_options,
      m.settings.map((s) => [s.name, s.commit]),
      m.sandbox,
      m.extra_src,
      m.instance_type ?? null,
    ]),
  );
  return h.digest('hex').slice(0, 16);
}

/** HEAD of ct's own checkout plus a hash of its uncommitted changes; the package path outside git. */
function codeVersion(): string {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
  const head = gitHead(root);
  if (!head) return `package:${root}`;
  const diff = execFileSync('git', ['diff', 'HEAD', '--', 'src', 'bin', 'package.json'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 64 * 1024 * 1024 });
  return `${head}:${createHash('sha256').update(diff).digest('hex')}`;
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

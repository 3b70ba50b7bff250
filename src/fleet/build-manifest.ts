/**
 * The fleet's manifest and id, from the compiled run (`eval/run-plan.ts`), the code snapshot, the
 * pinned settings (`settings-pin.ts`) and the shipped trees: the jobs (samples x epochs), pins
 * for settings that exist only as local folders (which `local:` workers read in place), and the
 * fleet id over everything that changes results.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { planIdInputs, type FleetPlan, type RunPlan } from '../eval/run-plan.js';
import { trustedPowers } from '../tasks/compose-trust.js';
import { GitRunner } from '../tasks/git-runner.js';
import { SettingsLock } from '../tasks/settings-lock.js';
import { SettingsRegistry } from '../tasks/settings-registry.js';
import type { Sample } from '../tasks/types.js';
import { artifactKey, type CodeSnapshot, type GitOptions } from './code-artifact.js';
import { extraSrcHash, type PackedExtraSrc } from './extra-src.js';
import { fleetId as fleetIdOf } from './fleet-id.js';
import { PROTOCOL_VERSION, type Job, type Manifest, type ManifestSetting } from './protocol.js';
import { pinSettings } from './settings-pin.js';

export interface FleetManifestInput {
  plan: RunPlan & { fleet: FleetPlan };
  config: Config;
  samples: readonly Sample[];
  /** The model the policy calls (the log's eval.model). */
  model?: string;
  /** Samples each worker runs at once (the plan's, or an EC2 instance's size). */
  perWorker: number;
  code: CodeSnapshot;
  git: GitOptions;
  extraSrc: readonly PackedExtraSrc[];
  workerSetup?: { path: string; sha256: string };
  /** The project root settings are registered in. */
  cwd: string;
}

/** The run's manifest (created now) and its fleet id. */
export async function buildFleetManifest(o: FleetManifestInput): Promise<{ manifest: Manifest; fleetId: string }> {
  const { plan, config } = o;
  const jobs = jobsOf(o.samples, plan.epochs);
  const settingNames = [...new Set(jobs.map((j) => j.setting))];
  let settings: ManifestSetting[];
  try {
    settings = await pinSettings(settingNames, {
      registry: new SettingsRegistry(config, o.cwd),
      lock: SettingsLock.read(o.cwd),
      settingsDir: config.settings_dir,
      git: new GitRunner(o.git),
    });
  } catch (e) {
    // Workers on this machine read the same settings folder: a setting that is only a local folder is fine for them.
    if (!(e instanceof ConfigError) || plan.fleet.workers.kind !== 'local') throw e;
    settings = pinLocalSettings(config, settingNames);
  }
  // Workers trust exactly what this selection was allowed (the controller's catalog refused the rest).
  const used = trustedPowers(o.samples.map((s) => s.env));
  settings = settings.map((s) => (used[s.name] ? { ...s, trust: used[s.name] } : s));
  const base: Omit<Manifest, 'fleet_id' | 'created'> = {
    version: PROTOCOL_VERSION,
    task_name: plan.taskName,
    epochs: plan.epochs,
    policy: plan.policy,
    ...(plan.protocol ? { protocol: plan.protocol } : {}),
    ...(o.model ? { model: o.model } : {}),
    sample_options: plan.sampleOptions,
    samples_per_worker: o.perWorker,
    ...(plan.fleet.fixedPerWorker ? { concurrency_fixed: true as const } : {}),
    max_attempts: plan.fleet.maxAttempts,
    code: { sha: o.code.sha, kind: o.code.kind, artifact_key: artifactKey(o.code.sha) },
    settings,
    extra_src: o.extraSrc.map((p) => ({ name: p.name, sha256: p.sha256 })),
    sandbox: { spec: plan.sandbox, ...(o.workerSetup ? { worker_setup: o.workerSetup } : {}), ...(plan.unsafeLocal && plan.sandbox === 'local' ? { unsafe_local: true as const } : {}) },
    jobs,
  };
  const xsHash = extraSrcHash(o.extraSrc);
  // The plan names what of the run changes results; the code, settings, samples and shipped trees are added here.
  const planned = planIdInputs(plan);
  const fleetId = fleetIdOf({
    ...planned,
    codeSha: o.code.sha,
    ...(o.model ? { model: o.model } : {}),
    sampleIds: o.samples.map((s) => s.id),
    ...(o.workerSetup ? { workerSetupHash: o.workerSetup.sha256 } : {}),
    ...(xsHash ? { extraSrcHash: xsHash } : {}),
    settings: settings.map((x) => `${x.name}@${x.commit}`),
    options: { ...planned.options, settings_of: jobs.map((j) => j.setting) },
  });
  return { manifest: { ...base, fleet_id: fleetId, created: new Date().toISOString() }, fleetId };
}

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

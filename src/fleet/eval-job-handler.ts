/**
 * An eval fleet's jobs (`job-handler.ts`): before taking any, the worker fetches every setting
 * the manifest pins, at the pinned commit (`settings-fetch.ts`), runs the `--worker-setup`
 * script and builds the policy; each job's sample is resolved from those checkouts and run in
 * the sandbox through the one sample lifecycle (`runSamplePool`).
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config/config.js';
import { readDotenvFile } from '../config/dotenv-file.js';
import { ConfigError, errorMessage } from '../errors.js';
import { runSamplePool } from '../eval/sample-pool.js';
import { checkLocalSandbox } from '../sandbox/local/local-provider.js';
import { ModelRegistry } from '../models/model-registry.js';
import { createRunPolicy } from '../control/protocols.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import type { GitRunner } from '../tasks/git-runner.js';
import type { Sample } from '../tasks/types.js';
import { composeNeeds } from '../sandbox/docker/compose-resources.js';
import { DEFAULT_SAMPLE_NEEDS, type SampleNeeds } from './adaptive-concurrency.js';
import { firstLine } from './job-messages.js';
import type { JobHandler } from './job-handler.js';
import { fleetLogHeader, oneSampleLog } from './one-sample-log.js';
import type { AnyJob, Manifest } from './protocol.js';
import { fetchPinnedSettings, settingsCacheDir } from './settings-fetch.js';

const execFileAsync = promisify(execFile);

/** An eval job's work: its sample and epoch (a `PoolItem`). */
export interface EvalWork {
  sample: Sample;
  epoch: number;
}

export interface EvalJobHandlerOptions {
  manifest: Manifest;
  config: Config;
  version: string;
  cwd: string;
  git: GitRunner;
  /** The folder the extra-src trees were unpacked in, and the import roots (cwd first). */
  extraSrcDir: string;
  importRoots: string[];
  log: (line: string) => void;
}

/** Prepares this worker for an eval fleet's jobs (settings, worker setup, policy). */
export async function evalJobHandler(o: EvalJobHandlerOptions): Promise<JobHandler<EvalWork>> {
  const { manifest, config } = o;
  // The controller's rule for an unisolated sandbox, applied again here: a worker runs what the manifest says.
  const localWarning = checkLocalSandbox(manifest.sandbox.spec, { policy: manifest.policy.name, args: manifest.policy.args, protocol: manifest.protocol !== undefined }, manifest.sandbox.unsafe_local === true);
  if (localWarning) o.log(`warning: ${localWarning}`);
  // Before any job: a worker that cannot get the pinned settings exits and leaves the jobs queued.
  const cacheDir = settingsCacheDir(config);
  const dirs = await fetchPinnedSettings(manifest.settings, { cacheDir, git: o.git, cwd: o.cwd, log: o.log });
  // The controller checked the selection against its ct.config.yml; the worker checks its own
  // checkout against what the controller trusted, so a job whose compose file asks for more fails.
  const trust = new Map(manifest.settings.flatMap((s) => (s.trust?.length ? [[s.name, s.trust] as const] : [])));
  const catalog = new SettingsCatalog(cacheDir, trust, dirs);
  if (manifest.sandbox.worker_setup) {
    await runWorkerSetup(o.extraSrcDir, manifest.sandbox.worker_setup.path, config.fleet.worker_setup_env, o.log);
    applySetupEnv(config.fleet.worker_setup_env, o.log);
  }
  const policy = await createRunPolicy(manifest.policy, manifest.protocol, {
    models: new ModelRegistry(config.models),
    cwd: o.cwd,
    importRoots: o.importRoots,
  });
  const header = fleetLogHeader(manifest, o.version);
  return {
    sandbox: manifest.sandbox.spec,
    describe: (job) => `${job.sample_id} epoch ${job.epoch}`,
    resolve: async (job) => ({ sample: resolveSample(catalog, job), epoch: job.epoch }),
    run: (r) =>
      runSamplePool({
        work: r.work,
        maxSamples: r.concurrency,
        provider: r.session.provider,
        policy,
        sampleOptions: manifest.sample_options,
        signal: r.session.signal,
        prepareEnvironment: (item) => r.session.prepareEnvironment({ name: item.sample.env.id, composeFile: item.sample.env.composeFile }),
        onStart: r.onStart,
        ...(r.onPhase ? { onPhase: r.onPhase } : {}),
        onResult: r.onResult,
      }),
    needs: () => fleetNeeds(catalog, manifest),
    resultLog: (_item, sample) => oneSampleLog(sample, header),
    errorOf: (sample) => (sample.error ? firstLine(sample.error.message) : undefined),
  };
}

/**
 * `--worker-setup`: the script inside an extra-src tree, run once before any job is taken, from
 * the folder the trees are unpacked in. It finds the file to leave variables in (`envFile`,
 * fleet.worker_setup_env) in $CT_FLEET_WORKER_SETUP_ENV, whatever set it (the default, the
 * config file, the variable), so one script works on EC2 workers and on any other machine.
 */
async function runWorkerSetup(dir: string, path: string, envFile: string, log: (line: string) => void): Promise<void> {
  log(`running worker setup ${path}`);
  try {
    const r = await execFileAsync('sh', [join(dir, path)], { cwd: dir, env: { ...process.env, CT_FLEET_WORKER_SETUP_ENV: envFile }, maxBuffer: 16 * 1024 * 1024 });
    if (r.stdout.trim()) log(r.stdout.trim().split('\n').slice(-5).join('\n'));
  } catch (e) {
    throw new ConfigError(`worker setup ${path} failed: ${errorMessage(e).split('\n').slice(-5).join('\n')}`);
  }
}

/**
 * The variables a setup script left in `file` (NAME=value lines), for the sandbox: set in this
 * process's environment, which providers and their tools inherit; a variable already set wins.
 */
function applySetupEnv(file: string, log: (line: string) => void): void {
  if (!existsSync(file)) return;
  const vars = readDotenvFile(file);
  const set = Object.keys(vars).filter((k) => process.env[k] === undefined);
  for (const k of set) process.env[k] = vars[k];
  log(`worker setup environment from ${file}: ${set.join(', ') || 'nothing new'}`);
}

/**
 * The most one job of the fleet needs: over its environments, the largest memory and CPUs their
 * compose files' resource limits state (compose-resources.ts), each else the default.
 */
function fleetNeeds(catalog: SettingsCatalog, manifest: Manifest): SampleNeeds | undefined {
  let memoryBytes = 0;
  let cpus = 0;
  const seen = new Set<string>();
  for (const job of manifest.jobs) {
    const name = `${job.setting}:${job.env}`;
    if (seen.has(name)) continue;
    seen.add(name);
    let stated;
    try {
      stated = composeNeeds(catalog.resolve(name).composeFile);
    } catch {
      continue; // the job fails when it runs, with the reason
    }
    memoryBytes = Math.max(memoryBytes, stated.memoryBytes ?? 0);
    cpus = Math.max(cpus, stated.cpus ?? 0);
  }
  if (memoryBytes === 0 && cpus === 0) return undefined;
  return { memoryBytes: memoryBytes || DEFAULT_SAMPLE_NEEDS.memoryBytes, cpus: cpus || DEFAULT_SAMPLE_NEEDS.cpus };
}

/** The job's sample from the settings the manifest pins. */
function resolveSample(catalog: SettingsCatalog, job: AnyJob): Sample {
  if (!('setting' in job)) throw new ConfigError(`job ${job.job_id} is not a sample of an eval fleet`);
  const env = catalog.resolve(`${job.setting}:${job.env}`);
  const main = env.mainTasks.get(job.main_task);
  const side = job.side_task ? env.sideTasks.get(job.side_task) : undefined;
  if (!main || (job.side_task && !side)) {
    throw new ConfigError(`job ${job.job_id}: ${job.setting}:${job.env} has no ${!main ? `main task ${job.main_task}` : `side task ${job.side_task}`} here`);
  }
  const sample: Sample = { id: [env.id, main.id, ...(side ? [side.id] : [])].join(':'), env, mainTask: main, ...(side ? { sideTask: side } : {}) };
  if (sample.id !== job.sample_id) throw new ConfigError(`job ${job.job_id} names sample ${job.sample_id}, but its env and tasks make ${sample.id}`);
  return sample;
}

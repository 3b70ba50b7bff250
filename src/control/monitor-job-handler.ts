/**
 * A monitor fleet's jobs on a worker (`fleet/job-handler.ts`): no settings, no sandbox, no
 * Docker. The monitor is built once from the manifest (its files written to a folder of this
 * worker's, its model the one the controller resolved), with this machine's reply cache in front
 * of the model (`monitor.cache_dir`: local workers share the controller's, EC2 ones start empty).
 * A job reads its input sample from the bucket and rates it with `monitorSample`, through the
 * same pool as samples (`runPool`); the monitored one-sample log keeps the input's header.
 * A job whose rating threw (not a failed model call: those leave actions unscored, as in a local
 * pass) fails its attempt and is offered again.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { ConfigError, errorMessage } from '../errors.js';
import { runPool } from '../eval/sample-pool.js';
import type { JobHandler } from '../fleet/job-handler.js';
import { oneSampleLog } from '../fleet/one-sample-log.js';
import type { MonitorManifest } from '../fleet/protocol.js';
import type { ResultStore } from '../fleet/types.js';
import { readEvalLog } from '../log/eval-reader.js';
import type { EvalPlan, EvalSample, EvalSpec } from '../log/types.js';
import { ModelRegistry } from '../models/model-registry.js';
import { MonitorCache } from './monitor-cache.js';
import { createCachedMonitorModels } from './monitor-calls.js';
import { monitorSample } from './monitor-pass.js';
import { createMonitor } from './monitor-registry.js';

/** A monitor job's work: the input sample and its log's header. */
export interface MonitorWork {
  input: EvalSample;
  header: { spec: EvalSpec; plan: EvalPlan };
}

export interface MonitorJobHandlerOptions {
  manifest: MonitorManifest;
  store: ResultStore;
  config: Config;
  cwd: string;
  importRoots: string[];
  log: (line: string) => void;
}

/** Prepares this worker for a monitor fleet's jobs. */
export async function monitorJobHandler(o: MonitorJobHandlerOptions): Promise<JobHandler<MonitorWork> & { close(): Promise<void> }> {
  const { manifest, config } = o;
  const dir = await mkdtemp(join(tmpdir(), 'ct-monitor-job-'));
  const args = { ...manifest.monitor.args };
  for (const f of manifest.monitor.files) {
    const path = join(dir, `${f.arg}-${f.name}`);
    await writeFile(path, f.content);
    args[f.arg] = path;
  }
  // The model the controller resolved (its model roles are not this machine's).
  if (manifest.monitor.model && (args.model !== undefined || !manifest.monitor.name.includes(':'))) args.model = manifest.monitor.model;
  const cache = config.monitor.cache ? new MonitorCache(config.monitor.cache_dir!) : undefined;
  const calls = createCachedMonitorModels({ cache, maxConnections: config.monitor.max_connections });
  const monitor = await createMonitor(manifest.monitor.name, args, { models: new ModelRegistry(config.models), calls, cwd: o.cwd, importRoots: o.importRoots });
  o.log(`monitor ${monitor.name}${monitor.model ? ` (${monitor.model})` : ''}; reply cache ${cache?.dir ?? 'off'}`);
  const inputs = manifest.inputs;
  return {
    describe: (job) => `${job.sample_id} epoch ${job.epoch}${'input' in job ? ` of ${inputs[job.input]?.name ?? '?'}` : ''}`,
    resolve: async (job) => {
      const bytes = await o.store.getInput(job.job_id);
      if (!bytes) throw new ConfigError(`job ${job.job_id}: its input is not in the bucket`);
      const file = join(dir, `${job.job_id}.eval`);
      await writeFile(file, bytes);
      try {
        const log = await readEvalLog(file);
        const input = log.samples?.find((s) => String(s.id) === job.sample_id && s.epoch === job.epoch);
        if (!input) throw new ConfigError(`job ${job.job_id}: its input holds no sample ${job.sample_id} epoch ${job.epoch}`);
        return { input, header: { spec: log.eval, plan: log.plan } };
      } finally {
        await rm(file, { force: true });
      }
    },
    run: (r) =>
      runPool({
        work: r.work,
        maxSamples: r.concurrency,
        signal: r.session.signal,
        stopTaking: r.session.stopping,
        onStart: r.onStart,
        onResult: r.onResult,
        run: async (item, signal) => {
          try {
            const done = await monitorSample(item.input, monitor, { signal });
            return { sample: done.sample, end: 'ok' };
          } catch (e) {
            // Stopped (the worker hands the job back) or the rating threw (an attempt that failed).
            const message = errorMessage(e);
            return { sample: { ...item.input, error: { message, traceback: message, traceback_ansi: message } }, end: signal.aborted ? 'cancelled' : 'no-result', reason: message };
          }
        },
      }),
    resultLog: (item, sample) => oneSampleLog(sample, item.header),
    errorOf: () => undefined,
    close: () => rm(dir, { recursive: true, force: true }),
  };
}


/**
 * A controller and its workers in one process, on the in-memory queue and store (the twins of
 * SQS and S3) with the `local` sandbox, the `test` policy and an injected clock.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { loadConfig } from '../../../src/config/config.js';
import type { RunFleetOptions } from '../../../src/fleet/controller.js';
import { jobsOf, pinLocalSettings } from '../../../src/fleet/build-manifest.js';
import { FleetEventsLog } from '../../../src/fleet/events-log.js';
import type { FleetLauncher } from '../../../src/fleet/launcher.js';
import { MemoryJobQueue } from '../../../src/fleet/memory-job-queue.js';
import { MemoryBucket, MemoryResultStore } from '../../../src/fleet/memory-result-store.js';
import { MemorySqs } from '../../../src/fleet/memory-sqs.js';
import { PROTOCOL_VERSION, type Manifest } from '../../../src/fleet/protocol.js';
import { runWorker, type WorkerResult } from '../../../src/fleet/worker.js';
import { buildSampleOptions } from '../../../src/eval/sample-options.js';
import { SettingsCatalog } from '../../../src/tasks/environment-loader.js';
import { selectSamples } from '../../../src/tasks/selection.js';
import { settingsGitRunner } from '../../../src/tasks/settings-git.js';
import { EXAMPLE_SETTINGS } from '../../helpers/cli.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The fleet's world: one clock, one queue service, one bucket (removed after the test file). */
export function world(o: { settingsDir?: string } = {}) {
  let offset = 0;
  const now = () => Date.now() + offset;
  const sqs = new MemorySqs(now);
  const bucket = new MemoryBucket();
  const state = mkdtempSync(join(tmpdir(), 'ct-inproc-'));
  dirs.push(state);
  const env = {
    CT_SETTINGS_DIR: o.settingsDir ?? EXAMPLE_SETTINGS,
    CT_STATE_DIR: join(state, 'state'),
    CT_LOG_DIR: join(state, 'logs'),
    CT_FLEET_POLL_SECONDS: '1',
    CT_FLEET_IDLE_POLLS: '1',
    CT_FLEET_RETRY_DELAY: '0',
    CT_FLEET_VISIBILITY_TIMEOUT: '30',
  };
  const config = loadConfig({ cwd: state, env });
  return { sqs, bucket, config, env, state, advance: (ms: number) => (offset += ms) };
}

export function manifestOf(w: ReturnType<typeof world>, epochs: number): Manifest {
  const samples = selectSamples(new SettingsCatalog(w.config.settings_dir, new Map()), { envs: ['notes_app'], mainTasks: ['create_greeting'], sideTasks: [], justMainTasks: true, cwd: w.state });
  return {
    version: PROTOCOL_VERSION,
    fleet_id: `inproc${epochs}`,
    created: new Date().toISOString(),
    task_name: 'in-process',
    epochs,
    policy: { name: 'test', args: {} },
    sample_options: buildSampleOptions(w.config, {}),
    samples_per_worker: 2,
    max_attempts: 3,
    settings: pinLocalSettings(w.config, ['demo']),
    extra_src: [],
    sandbox: { spec: 'local' },
    jobs: jobsOf(samples, epochs),
  };
}

/** Workers as in-process `runWorker` calls; their log lines are kept. */
export function inProcessLauncher(w: ReturnType<typeof world>, fleetId: string, start = true) {
  const lines: string[] = [];
  const runs: Array<Promise<WorkerResult>> = [];
  const stops: AbortController[] = [];
  let started = 0;
  const launcher: FleetLauncher = {
    // Without workers of its own it is an external fleet: nobody to count or replace.
    kind: start ? 'local' : 'external',
    async start(n: number) {
      if (!start) return 0;
      for (let i = 0; i < n; i++) {
        const name = `w${++started}`;
        const stop = new AbortController();
        stops.push(stop);
        runs.push(
          runWorker({
            queue: new MemoryJobQueue(w.sqs, fleetId, w.config.fleet.queue_prefix),
            store: new MemoryResultStore(w.bucket, fleetId),
            config: w.config,
            workerName: name,
            version: 'test',
            cwd: w.state,
            git: settingsGitRunner(w.config, w.env),
            log: (l) => lines.push(`${name} ${l}`),
            handleSignals: false,
            stop: stop.signal,
          }),
        );
      }
      return n;
    },
    async alive() {
      return start ? runs.length : undefined;
    },
    async stopAll() {
      stops.forEach((s) => s.abort());
    },
    names: () => Array.from({ length: started }, (_, i) => `w${i + 1}`),
    workerCommand: () => 'ct fleet worker',
  };
  return { launcher, lines, runs, stops, starts: () => lines.filter((l) => / job \S+ started: /.test(l)) };
}

export function options(w: ReturnType<typeof world>, m: Manifest, launcher: FleetLauncher, state: RunFleetOptions['state'], signal = new AbortController().signal, notes: string[] = []): RunFleetOptions {
  return {
    queue: new MemoryJobQueue(w.sqs, m.fleet_id, w.config.fleet.queue_prefix),
    store: new MemoryResultStore(w.bucket, m.fleet_id),
    manifest: m,
    state,
    launcher,
    workers: 2,
    timings: { visibilityTimeout: 30, maxAttempts: 3, pollSeconds: 1, checkSeconds: 0.2, staleWarningMinutes: 10, staleTeardownMinutes: 60 },
    logDir: w.config.log_dir,
    version: 'test',
    events: new FleetEventsLog(w.config.log_dir, m.fleet_id),
    progress: { update() {}, note: (t) => notes.push(t), stop() {} },
    pricePerWorkerHour: 0,
    resumeCommand: 'ct run eval ...',
    signal,
  };
}

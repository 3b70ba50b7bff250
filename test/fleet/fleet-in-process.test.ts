/**
 * A controller and its workers in one process, on the in-memory queue and store (the twins of
 * SQS and S3) with the `local` sandbox and an injected clock: the logic of stop / resume /
 * silent death / hand-back without Docker, moto or a process per worker. A stopped controller's
 * resume queues nothing twice; a delivery that died silently is the job's next attempt; a worker
 * stopped politely hands its jobs back for free; every job's sandbox starts once per attempt.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { inspectFleet, runFleet, type RunFleetOptions } from '../../src/fleet/controller.js';
import { jobsOf, pinLocalSettings } from '../../src/fleet/build-manifest.js';
import { FleetEventsLog } from '../../src/fleet/events-log.js';
import type { FleetLauncher } from '../../src/fleet/launcher.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { MemorySqs } from '../../src/fleet/memory-sqs.js';
import { PROTOCOL_VERSION, type Manifest } from '../../src/fleet/protocol.js';
import { runWorker, type WorkerResult } from '../../src/fleet/worker.js';
import { buildSampleOptions } from '../../src/eval/sample-options.js';
import { SettingsCatalog } from '../../src/tasks/environment-loader.js';
import { selectSamples } from '../../src/tasks/selection.js';
import { settingsGitRunner } from '../../src/tasks/settings-git.js';
import { EXAMPLE_SETTINGS } from '../helpers/cli.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The fleet's world: one clock, one queue service, one bucket. */
function world() {
  let offset = 0;
  const now = () => Date.now() + offset;
  const sqs = new MemorySqs(now);
  const bucket = new MemoryBucket();
  const state = mkdtempSync(join(tmpdir(), 'ct-inproc-'));
  dirs.push(state);
  const env = {
    CT_SETTINGS_DIR: EXAMPLE_SETTINGS,
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

function manifestOf(w: ReturnType<typeof world>, epochs: number): Manifest {
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
function inProcessLauncher(w: ReturnType<typeof world>, fleetId: string, start = true) {
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

function options(w: ReturnType<typeof world>, m: Manifest, launcher: FleetLauncher, state: RunFleetOptions['state'], signal = new AbortController().signal, notes: string[] = []): RunFleetOptions {
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

describe('controller and workers in one process (memory twins, local sandbox, injected clock)', () => {
  test('stopped, then a delivery lost with its worker, then resumed: nothing queued twice, the lost delivery is attempt 2, each job ends once', async () => {
    const w = world();
    const m = manifestOf(w, 3);
    // 1. A controller with no workers, stopped once its jobs are queued.
    const stop = new AbortController();
    const notes: string[] = [];
    const idle = inProcessLauncher(w, m.fleet_id, false);
    const first = runFleet(options(w, m, idle.launcher, await inspectFleet(new MemoryResultStore(w.bucket, m.fleet_id), m), stop.signal, notes));
    while (!notes.some((n) => /3 job\(s\) queued/.test(n))) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    assert.equal((await first).end, 'stopped');
    const queue = new MemoryJobQueue(w.sqs, m.fleet_id, w.config.fleet.queue_prefix);
    assert.equal((await queue.depth()).work.visible, 3);

    // 2. A worker takes one job and dies without a word: its visibility runs out (the clock jumps).
    const [lost] = await queue.receive({ max: 1, waitSeconds: 0 });
    assert.ok(lost);
    w.advance(31_000);

    // 3. The same run again: nothing queued twice; two workers finish every job.
    const workers = inProcessLauncher(w, m.fleet_id);
    const notes2: string[] = [];
    const r = await runFleet(options(w, m, workers.launcher, await inspectFleet(new MemoryResultStore(w.bucket, m.fleet_id), m), undefined, notes2));
    await Promise.all(workers.runs);
    assert.equal(r.end, 'complete');
    assert.equal(r.enqueued, 0, notes2.join('\n'));
    assert.match(notes2.join('\n'), /0 job\(s\) queued, 3 still queued from before/);
    assert.equal(r.merge!.rows.length, 3);
    assert.ok(r.merge!.rows.every((x) => !x.error));
    assert.equal(workers.starts().length, 3, `one sandbox start per job:\n${workers.lines.join('\n')}`);
    const lostId = lost.message!.job.job_id;
    assert.ok(workers.starts().some((l) => l.includes(`job ${lostId} started`) && /\(attempt 2 of 3\)/.test(l)), 'the silent death counted as an attempt');
    assert.equal(workers.starts().filter((l) => /\(attempt 1 of 3\)/.test(l)).length, 2);
  });

  test('a worker stopped politely mid-run hands its jobs back: the next worker runs them as attempt 1', async () => {
    const w = world();
    const m = manifestOf(w, 4);
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    const workers = inProcessLauncher(w, m.fleet_id);
    const notes: string[] = [];
    const stopEarly = async () => {
      // Stop the first worker as soon as it has started its first samples.
      while (!workers.lines.some((l) => / job \S+ started: /.test(l))) await new Promise((r) => setTimeout(r, 5));
      workers.stops[0]!.abort();
    };
    const [r] = await Promise.all([runFleet(options(w, m, workers.launcher, await inspectFleet(store, m), undefined, notes)), stopEarly()]);
    await Promise.all(workers.runs);
    assert.equal(r.end, 'complete', notes.join('\n'));
    assert.equal(r.merge!.rows.length, 4);
    assert.ok(r.merge!.rows.every((x) => !x.error));
    const handedBack = workers.lines.filter((l) => /handed back \(the worker is stopping\)/.test(l));
    assert.ok(handedBack.length >= 1, workers.lines.join('\n'));
    assert.ok(!workers.lines.some((l) => /\(attempt 2 of 3\)/.test(l)), `a hand-back spends no attempt:\n${workers.lines.join('\n')}`);
  });
});

/**
 * An in-process worker (memory twins, the `local` sandbox, the `test` policy; no Docker) leaves
 * the fleet after fleet.idle_minutes without a job while another worker still holds one, and
 * tells the controller the concurrency it started with.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { PROTOCOL_VERSION } from '../../src/fleet/protocol.js';
import { backstopReceiveCount } from '../../src/fleet/types.js';
import { runWorker } from '../../src/fleet/worker.js';
import { settingsGitRunner } from '../../src/tasks/settings-git.js';
import { manifestOf, world } from './helpers/in-process-fleet.js';

const GiB = 1024 ** 3;

test('a worker with no job for fleet.idle_minutes exits 0 (idle) while the fleet goes on; it reports its starting concurrency first', async () => {
  const w = world();
  // 0.02 min: 1.2 s without a job.
  const config = loadConfig({ cwd: w.state, env: { ...w.env, CT_FLEET_IDLE_MINUTES: '0.02', CT_FLEET_MAX_CONCURRENCY: '3' } });
  const m = manifestOf(w, 2);
  const queue = new MemoryJobQueue(w.sqs, m.fleet_id, config.fleet.queue_prefix);
  const store = new MemoryResultStore(w.bucket, m.fleet_id);
  await store.putManifest(m);
  await queue.create({ visibilityTimeoutSeconds: 30, maxReceiveCount: backstopReceiveCount(3) });
  await queue.enqueue(m.jobs.map((job) => ({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, job, ticket: 1 })));
  // Another worker took one job and runs it for long: the queue is not empty, so the end-of-work rule (idle_polls) does not apply.
  const [held] = await queue.receive({ max: 1, waitSeconds: 0 });
  assert.ok(held);
  const lines: string[] = [];
  const started = Date.now();
  const r = await runWorker({
    queue,
    store,
    config,
    workerName: 'w1',
    version: 'test',
    cwd: w.state,
    git: settingsGitRunner(config, w.env),
    log: (l) => lines.push(l),
    handleSignals: false,
    probes: { memAvailable: () => 30 * GiB, memoryPressure: () => 0, cpuLoad: () => 0.1, cpus: () => 16, now: Date.now },
  });
  assert.equal(r.stopped, 'idle', lines.join('\n'));
  assert.equal(r.exitCode, 0);
  assert.equal(r.jobs.ok, 1, 'it ran the job it could take');
  assert.ok(Date.now() - started >= 1200, 'not before fleet.idle_minutes');
  assert.ok(lines.some((l) => /no job for \d+ min \(fleet\.idle_minutes\); leaving the fleet to the other workers/.test(l)));
  assert.ok(lines.some((l) => /worker w1 stopped \(idle\)/.test(l)));
  assert.equal((await queue.depth()).work.inFlight, 1, 'the other worker\'s job is untouched');
  const done = await queue.receiveDone({ max: 10, waitSeconds: 0 });
  const reports = done.map((d) => d.message).filter((x) => x?.status === 'concurrency');
  assert.deepEqual(
    reports.map((x) => x!.status === 'concurrency' && [x!.worker, x!.concurrency.from, x!.concurrency.to, x!.concurrency.reason]),
    [['w1', 2, 2, 'start']],
    'samples_per_worker 2 on a machine that holds more, under a ceiling of 3',
  );
});

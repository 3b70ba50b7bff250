/**
 * The controller's logic against the in-memory queue and store (milliseconds, no Docker): what
 * it enqueues, when it starts workers, how it turns dead-lettered jobs into error results, and
 * what a resume does. The workers here are scripted: they act on the queue as real workers do.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { inspectFleet, runFleet, type RunFleetOptions } from '../../src/fleet/controller.js';
import { ConfigError } from '../../src/errors.js';
import { FleetEventsLog } from '../../src/fleet/events-log.js';
import type { FleetCounts } from '../../src/fleet/fleet-progress.js';
import type { FleetLauncher } from '../../src/fleet/launcher.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { MemorySqs } from '../../src/fleet/memory-sqs.js';
import { fleetLogHeader, oneSampleLog } from '../../src/fleet/one-sample-log.js';
import { PROTOCOL_VERSION, type Job, type Manifest } from '../../src/fleet/protocol.js';
import type { EvalSample } from '../../src/log/types.js';
import { readWithInspect } from '../helpers/inspect.js';
import { epochsManifest } from '../helpers/fleet-sim.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function manifest(fleetId: string, n: number): Manifest {
  return epochsManifest(fleetId, n);
}

function sample(j: Job): EvalSample {
  const now = new Date().toISOString();
  return {
    id: j.sample_id, epoch: j.epoch, input: 'x', target: '', messages: [], output: { model: 'none', choices: [], completion: '' },
    scores: { linux_scorer: { value: { main_task_success: 'C' }, history: [] } as never },
    metadata: {}, store: {}, events: [], model_usage: {}, role_usage: {}, started_at: now, completed_at: now, total_time: 0, working_time: 0, attachments: {},
  };
}

/** A launcher whose "workers" run in this process: each takes jobs and either stores a result or fails them (never deletes). */
function scriptedLauncher(queue: MemoryJobQueue, store: MemoryResultStore, m: Manifest, fails: (jobId: string) => boolean): FleetLauncher & { started: number } {
  let running = 0;
  const header = fleetLogHeader(m, 'test');
  const l = {
    kind: 'local' as const,
    started: 0,
    async start(n: number) {
      for (let i = 0; i < n; i++) {
        const name = `mem-${++l.started}`;
        running++;
        void (async () => {
          for (let idle = 0; idle < 20; ) {
            const got = await queue.receive({ max: 1, waitSeconds: 0 }).catch(() => []);
            if (got.length === 0) {
              idle++;
              await new Promise((r) => setTimeout(r, 20));
              continue;
            }
            const d = got[0]!;
            const job = d.message!.job;
            const attempt = d.message!.attempts + d.receiveCount;
            if (fails(job.job_id)) {
              // As a worker does: the failure joins the job's history; queued again, or dead-lettered after 3 attempts.
              const history = [...d.message!.history, { attempt, worker: name, error: 'sandbox would not start' }];
              if (attempt >= 3) await queue.deadLetter({ ...d.message!, attempts: attempt, history, dead: { reason: 'sandbox would not start', attempts: attempt } });
              else {
                await queue.sendDone({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, job_id: job.job_id, status: 'error', error: 'sandbox would not start', attempt, worker: name, seconds: 0 });
                await queue.enqueue([{ ...d.message!, attempts: attempt, history }]);
              }
              await queue.delete(d.receiptHandle);
              continue;
            }
            await store.putResult(job.job_id, await oneSampleLog(sample(job as Job), header));
            await queue.sendDone({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, job_id: job.job_id, status: 'ok', attempt: d.receiveCount, worker: name, seconds: 0 });
            await queue.delete(d.receiptHandle);
          }
          running--;
        })();
      }
      return n;
    },
    async alive() {
      return running;
    },
    async stopAll() {},
    names: () => Array.from({ length: l.started }, (_, i) => `mem-${i + 1}`),
    workerCommand: () => 'ct fleet worker --fleet x',
  };
  return l;
}

function options(o: Pick<RunFleetOptions, 'queue' | 'store' | 'manifest' | 'state' | 'launcher'>, logDir: string): RunFleetOptions {
  return {
    ...o,
    workers: 2,
    timings: { visibilityTimeout: 5, maxAttempts: 3, pollSeconds: 1, checkSeconds: 0.05, staleWarningMinutes: 10, staleTeardownMinutes: 60 },
    logDir,
    version: 'test',
    events: new FleetEventsLog(logDir, o.manifest.fleet_id),
    progress: { update() {}, note() {}, stop() {} },
    pricePerWorkerHour: 0,
    resumeCommand: 'ct run eval ...',
    signal: new AbortController().signal,
  };
}

describe('fleet controller (in-memory queue and store)', () => {
  test('enqueues every job, starts workers, dead-letters a job that always fails as an error result, merges one log; a resume enqueues 0 and starts 0', async () => {
    const sqs = new MemorySqs();
    const bucket = new MemoryBucket();
    const m = manifest('memfleet1', 6);
    const queue = new MemoryJobQueue(sqs, m.fleet_id, 'lb-fleet-');
    const store = new MemoryResultStore(bucket, m.fleet_id);
    const logDir = mkdtempSync(join(tmpdir(), 'ct-ctl-mem-'));
    dirs.push(logDir);
    const launcher = scriptedLauncher(queue, store, m, (id) => id === 'env.task.e3');
    const state = await inspectFleet(store, m);
    assert.equal(state.prior, undefined);
    const r = await runFleet(options({ queue, store, manifest: m, state, launcher }, logDir));
    assert.equal(r.end, 'complete');
    assert.equal(r.enqueued, 6);
    assert.equal(launcher.started, 2);
    assert.deepEqual(r.dead.map((d) => [d.job.job_id, d.attempts]), [['env.task.e3', 3]]);
    assert.equal(r.merge!.rows.length, 6);
    const dead = r.merge!.rows.find((x) => x.jobId === 'env.task.e3')!;
    assert.match(dead.error!, /failed on all 3 attempt\(s\) on mem-\d.*last error: sandbox would not start/);
    const [log] = await readWithInspect([r.merge!.path]);
    assert.equal(log!.samples.length, 6);
    assert.equal(await queue.exists(), false, 'queues deleted');
    const events = readFileSync(join(logDir, 'fleet', m.fleet_id, 'events.jsonl'), 'utf8');
    assert.equal((events.match(/"job_failed"/g) ?? []).length, 2, 'two failures reported; the third dead-lettered it');
    assert.match(events, /"job_dead".*"workers":\["mem-\d","mem-\d","mem-\d"\]/, 'the dead job names the workers that tried it');

    // Rerun with --no-retry-errors: everything has a result (the dead job its error sample): nothing to queue or start.
    const again = await inspectFleet(store, m);
    assert.equal(again.done.size, 6);
    assert.deepEqual(again.errors, [{ jobId: 'env.task.e3', kind: 'dead' }]);
    const launcher2 = scriptedLauncher(queue, store, m, () => false);
    const r2 = await runFleet({ ...options({ queue, store, manifest: m, state: again, launcher: launcher2 }, logDir), retryErrors: false });
    assert.equal(r2.enqueued, 0);
    assert.equal(launcher2.started, 0);
    assert.equal(r2.merge!.path, r.merge!.path, 'the same merged log is replaced');
    // Named as Inspect names a log (and as a local run names its own): the manifest's creation
    // time at whole seconds, the task, the task id; fixed by the fleet, so a resume replaces it.
    const { spec } = fleetLogHeader(m, 'test');
    assert.equal(basename(r.merge!.path), `2026-01-01T00-00-00-00-00_mem_${spec.task_id}.eval`);
    assert.deepEqual(readdirSync(logDir).filter((f) => f.endsWith('.eval')), [basename(r.merge!.path)]);

    // Rerun (retrying errors, the default) once the cause is fixed: only the dead job runs again, and the log holds its new result.
    const third = await inspectFleet(store, m);
    const launcher3 = scriptedLauncher(queue, store, m, () => false);
    const r3 = await runFleet(options({ queue, store, manifest: m, state: third, launcher: launcher3 }, logDir));
    assert.equal(r3.enqueued, 1);
    assert.equal(r3.retried, 1);
    assert.equal(r3.merge!.rows.length, 6);
    assert.equal(r3.merge!.rows.filter((x) => x.error).length, 0);
    assert.deepEqual(await store.listErrorMarkers(), []);
  });

  test('a resume enqueues only the jobs without a result', async () => {
    const sqs = new MemorySqs();
    const bucket = new MemoryBucket();
    const m = manifest('memfleet2', 5);
    const queue = new MemoryJobQueue(sqs, m.fleet_id, 'lb-fleet-');
    const store = new MemoryResultStore(bucket, m.fleet_id);
    const header = fleetLogHeader(m, 'test');
    await store.putManifest(m);
    for (const j of m.jobs.slice(0, 3)) await store.putResult(j.job_id, await oneSampleLog(sample(j), header));
    const logDir = mkdtempSync(join(tmpdir(), 'ct-ctl-mem-'));
    dirs.push(logDir);
    const state = await inspectFleet(store, m);
    assert.ok(state.prior);
    assert.equal(state.done.size, 3);
    const launcher = scriptedLauncher(queue, store, m, () => false);
    const r = await runFleet(options({ queue, store, manifest: m, state, launcher }, logDir));
    assert.equal(r.enqueued, 2);
    assert.equal(launcher.started, 2);
    assert.deepEqual(r.merge!.rows.map((x) => x.epoch), [1, 2, 3, 4, 5]);
  });

  test('another set of jobs under the same fleet id is refused', async () => {
    const bucket = new MemoryBucket();
    const m = manifest('memfleet3', 2);
    const store = new MemoryResultStore(bucket, m.fleet_id);
    await store.putManifest(m);
    await assert.rejects(inspectFleet(store, manifest('memfleet3', 3)), /describes other jobs than this run; start a new fleet with --new-fleet/);
  });
  test('an EC2 fleet grows while its busy workers cannot finish the backlog in fleet.scale_waves waves; a worker\'s concurrency change reaches events.jsonl', async () => {
    const sqs = new MemorySqs();
    const bucket = new MemoryBucket();
    const m = manifest('memfleet4', 40);
    const queue = new MemoryJobQueue(sqs, m.fleet_id, 'lb-fleet-');
    const store = new MemoryResultStore(bucket, m.fleet_id);
    const logDir = mkdtempSync(join(tmpdir(), 'ct-ctl-mem-'));
    dirs.push(logDir);
    const launcher = slotLauncher(queue, store, m, { slots: 2, jobMs: 80 });
    const notes: string[] = [];
    const counts: FleetCounts[] = [];
    const r = await runFleet({
      ...options({ queue, store, manifest: m, state: await inspectFleet(store, m), launcher }, logDir),
      workers: 1,
      scale: { maxWorkers: 4, waves: 2 },
      pricePerWorkerHour: 0.5,
      progress: { update: (c) => counts.push(c), note: (t) => notes.push(t), stop() {} },
    });
    assert.equal(r.end, 'complete');
    assert.equal(r.merge!.rows.length, 40);
    assert.equal(launcher.started, 4, 'grown from 1 to --max-workers 4, never past it');
    const events = readFileSync(join(logDir, 'fleet', m.fleet_id, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const scale = events.filter((e) => e.event === 'scale');
    assert.ok(scale.length >= 1, 'a scale event');
    assert.equal(scale[0]!.from, 1);
    assert.match(String(scale[0]!.reason), /job\(s\) queued, more than 1 busy worker\(s\) x 2 slot\(s\) finish in 2 wave\(s\)/);
    assert.ok(notes.some((n) => /^fleet grows to \d worker\(s\)/.test(n)), 'a progress note');
    const conc = events.filter((e) => e.event === 'concurrency');
    assert.ok(conc.some((e) => e.reason === 'start' && e.worker === 'ec2-1' && e.to === 2));
    assert.deepEqual(
      conc.filter((e) => e.reason === 'oom_killed').map((e) => [e.worker, e.from, e.to]),
      [['ec2-1', 2, 1]],
      'the worker reported halving after a memory kill',
    );
    assert.ok(notes.some((n) => n.startsWith('ec2-1 runs 1 sample(s) at once instead of 2: oom killed')));
    const last = counts[counts.length - 1]!;
    assert.equal(last.launched, 4, 'the progress line shows the launches');
    assert.ok(last.workerHours !== undefined && last.workerHours > 0, 'and the instance-hours so far');
    assert.ok(r.workerHours > 0);
    const teardown = events.find((e) => e.event === 'teardown')!;
    assert.equal(teardown.launched, 4, 'the record a resumed fleet\'s estimate reads');
    assert.ok(Number(teardown.worker_hours) > 0);
  });

  test('a dead worker\'s slots do not hold growth back: the fleet grows from the concurrency its live workers report', async () => {
    const sqs = new MemorySqs();
    const m = manifest('memfleet6', 40);
    const queue = new MemoryJobQueue(sqs, m.fleet_id, 'lb-fleet-');
    const store = new MemoryResultStore(new MemoryBucket(), m.fleet_id);
    const logDir = mkdtempSync(join(tmpdir(), 'ct-ctl-mem-'));
    dirs.push(logDir);
    // ec2-1 says it runs 64 at once and dies; with its report counted, 1 live worker x 33 slots x
    // 2 waves would hold the whole backlog and the fleet would never grow.
    const launcher = slotLauncher(queue, store, m, { slots: 2, jobMs: 80, ghostSlots: 64 });
    const r = await runFleet({
      ...options({ queue, store, manifest: m, state: await inspectFleet(store, m), launcher }, logDir),
      workers: 1,
      scale: { maxWorkers: 4, waves: 2 },
    });
    assert.equal(r.end, 'complete');
    assert.equal(r.merge!.rows.length, 40);
    const events = readFileSync(join(logDir, 'fleet', m.fleet_id, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const scale = events.filter((e) => e.event === 'scale');
    assert.ok(scale.length >= 1, 'the fleet grew');
    assert.match(String(scale[0]!.reason), /more than 1 busy worker\(s\) x 2 slot\(s\) finish in 2 wave\(s\)/);
    assert.equal(launcher.started, 5, 'the dead one, its replacement, and growth to --max-workers 4');
  });

  test('a growth EC2 refuses (an instance limit) is a warning: the fleet finishes with the workers it has', async () => {
    const sqs = new MemorySqs();
    const m = manifest('memfleet5', 16);
    const queue = new MemoryJobQueue(sqs, m.fleet_id, 'lb-fleet-');
    const store = new MemoryResultStore(new MemoryBucket(), m.fleet_id);
    const logDir = mkdtempSync(join(tmpdir(), 'ct-ctl-mem-'));
    dirs.push(logDir);
    const launcher = slotLauncher(queue, store, m, { slots: 2, jobMs: 30, refuseAfter: 1 });
    const notes: string[] = [];
    const r = await runFleet({
      ...options({ queue, store, manifest: m, state: await inspectFleet(store, m), launcher }, logDir),
      workers: 1,
      scale: { maxWorkers: 4, waves: 2 },
      progress: { update() {}, note: (t) => notes.push(t), stop() {} },
    });
    assert.equal(r.end, 'complete');
    assert.equal(launcher.started, 1);
    const events = readFileSync(join(logDir, 'fleet', m.fleet_id, 'events.jsonl'), 'utf8');
    assert.equal((events.match(/"kind":"scale_failed"/g) ?? []).length, 1, 'tried once: a refusal holds for the rest of the run');
    assert.ok(notes.some((n) => /^the fleet could not grow by \d worker\(s\) \(EC2 refused the launch .*\); it goes on with 1$/.test(n)), notes.join('\n'));
  });
});

/**
 * An `ec2` launcher whose "workers" run here: each reports its starting concurrency, runs up to
 * `slots` jobs at once (each `jobMs`), and the first reports one memory kill (2 -> 1) after its
 * first job. They leave when the queue is gone.
 */
function slotLauncher(queue: MemoryJobQueue, store: MemoryResultStore, m: Manifest, o: { slots: number; jobMs: number; refuseAfter?: number; ghostSlots?: number }): FleetLauncher & { started: number } {
  let running = 0;
  let calls = 0;
  const header = fleetLogHeader(m, 'test');
  const l = {
    kind: 'ec2' as const,
    started: 0,
    async start(n: number) {
      if (o.refuseAfter !== undefined && ++calls > o.refuseAfter) throw new ConfigError('EC2 refused the launch (VcpuLimitExceeded: limit reached)');
      for (let i = 0; i < n; i++) {
        const name = `ec2-${++l.started}`;
        running++;
        void (async () => {
          let slots = o.slots;
          const report = (from: number, to: number, reason: 'start' | 'oom_killed') =>
            queue.sendDone({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, status: 'concurrency', worker: name, concurrency: { from, to, reason } });
          if (o.ghostSlots !== undefined && name === 'ec2-1') {
            // A worker that reports many slots, then dies before it takes a job.
            await report(o.ghostSlots, o.ghostSlots, 'start');
            running--;
            return;
          }
          await report(o.slots, o.slots, 'start');
          let busy = 0;
          let finished = 0;
          for (;;) {
            if (!(await queue.exists())) break;
            if (busy >= slots) {
              await new Promise((r) => setTimeout(r, 5));
              continue;
            }
            const got = await queue.receive({ max: slots - busy, waitSeconds: 0 }).catch(() => []);
            if (got.length === 0) {
              await new Promise((r) => setTimeout(r, 10));
              continue;
            }
            for (const d of got) {
              busy++;
              void (async () => {
                await new Promise((r) => setTimeout(r, o.jobMs));
                const job = d.message!.job as Job;
                await store.putResult(job.job_id, await oneSampleLog(sample(job), header));
                await queue.sendDone({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, job_id: job.job_id, status: 'ok', attempt: d.receiveCount, worker: name, seconds: 0 });
                await queue.delete(d.receiptHandle).catch(() => {});
                busy--;
                if (++finished === 1 && name === 'ec2-1') {
                  slots = 1;
                  await report(2, 1, 'oom_killed');
                }
              })();
            }
          }
          running--;
        })();
      }
      return n;
    },
    async alive() {
      return running;
    },
    async stopAll() {},
    names: () => Array.from({ length: l.started }, (_, i) => `ec2-${i + 1}`),
    workerCommand: () => 'ct fleet worker --fleet x',
  };
  return l;
}

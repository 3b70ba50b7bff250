/**
 * A controller and its workers in one process, on the in-memory queue and store (the twins of
 * SQS and S3) with the `local` sandbox and an injected clock: the logic of stop / resume /
 * silent death / hand-back without Docker, moto or a process per worker. A stopped controller's
 * resume queues nothing twice; a delivery that died silently is the job's next attempt; a worker
 * stopped politely hands its jobs back for free; every job's sandbox starts once per attempt.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { inspectFleet, runFleet } from '../../src/fleet/controller.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { inProcessLauncher, manifestOf, options, world } from './helpers/in-process-fleet.js';

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
    // Each worker told the controller how many samples it starts with; the controller recorded it.
    const events = readFileSync(join(w.config.log_dir, 'fleet', m.fleet_id, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const starts = events.filter((e) => e.event === 'concurrency' && e.reason === 'start');
    assert.deepEqual(starts.map((e) => e.worker).sort(), ['w1', 'w2']);
    assert.ok(starts.every((e) => e.from === 2 && typeof e.to === 'number' && e.to >= 1 && e.to <= 2 && typeof e.detail === 'string'));
  });

  test('a worker stopped politely mid-run hands its jobs back: the next worker runs them as attempt 1', async () => {
    const w = world();
    const m = manifestOf(w, 4);
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    const workers = inProcessLauncher(w, m.fleet_id);
    const notes: string[] = [];
    // Stop the worker that starts the fleet's first sample, as it logs the start: its samples
    // (~0.1 s each here) are still running then. Polling for the line could come after they end.
    const push = workers.lines.push.bind(workers.lines);
    let stopped = '';
    workers.lines.push = (...added: string[]) => {
      const n = push(...added);
      for (const l of added) {
        const started = /^(w(\d+)) job \S+ started: /.exec(l);
        if (started && !stopped) {
          stopped = started[1]!;
          workers.stops[Number(started[2]) - 1]!.abort();
        }
      }
      return n;
    };
    const r = await runFleet(options(w, m, workers.launcher, await inspectFleet(store, m), undefined, notes));
    await Promise.all(workers.runs);
    assert.equal(r.end, 'complete', notes.join('\n'));
    assert.equal(r.merge!.rows.length, 4);
    assert.ok(r.merge!.rows.every((x) => !x.error));
    const handedBack = workers.lines.filter((l) => l.startsWith(`${stopped} `) && /handed back \(the worker is stopping\)/.test(l));
    assert.ok(handedBack.length >= 1, workers.lines.join('\n'));
    assert.ok(!workers.lines.some((l) => /\(attempt 2 of 3\)/.test(l)), `a hand-back spends no attempt:\n${workers.lines.join('\n')}`);
  });
});

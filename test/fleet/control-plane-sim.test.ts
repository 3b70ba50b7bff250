/**
 * The fleet's control plane, simulated (test/helpers/fleet-sim.ts): the real controller against
 * the in-memory twins with simulated workers on a mocked clock. At a few thousand jobs with
 * failures, dead jobs, lost reports and dying workers, every job ends with exactly one result,
 * dead workers are replaced, and the merged log holds every sample. (bench/fleet-control-plane.ts
 * runs the same at 100,000 jobs and 1,000 workers.)
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { readEvalLog } from '../../src/log/eval-reader.js';
import { simulateFleet } from '../helpers/fleet-sim.js';

function eventsOf(path: string): Array<{ event: string; [k: string]: unknown }> {
  return readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string });
}

describe('the fleet control plane, simulated', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: Date.parse('2026-01-01T00:00:00Z') }));
  afterEach(() => mock.timers.reset());

  test('3,000 jobs on 60 workers: failures, dead jobs, lost reports, 5% of workers dying: none lost, none twice, the dead replaced', async () => {
    const r = await simulateFleet({
      jobs: 3000,
      workers: 60,
      slots: 4,
      sampleSeconds: [30, 300],
      stragglerShare: 0.01,
      stragglerSeconds: 900,
      attemptFailureShare: 0.05,
      sampleErrorShare: 0.01,
      poisonShare: 0.005,
      lostReportShare: 0.01,
      deathShare: 0.05,
      checkSeconds: 30,
      seed: 7,
    });
    assert.equal(r.end, 'complete');
    assert.equal(r.workerErrors.length, 0, r.workerErrors.join('\n'));
    assert.equal(r.lost, 0, 'every job has its result');
    assert.equal(r.duplicatePuts, 0, 'no result was stored twice');
    assert.ok(r.poisoned > 0 && r.dead === r.poisoned, `the jobs failing every attempt are the dead ones (${r.dead} dead, ${r.poisoned} drawn)`);
    assert.equal(r.deaths, 3);
    const events = eventsOf(r.events);
    const replaced = events.filter((e) => e.event === 'replace').reduce((n, e) => n + (e.workers as string[]).length, 0);
    assert.equal(r.launches, 60 + replaced, 'every launch past the first 60 is a replacement the controller logged');
    assert.ok(replaced >= 1, 'a worker that died while work was queued was replaced');
    const done = events.filter((e) => e.event === 'job_done');
    assert.equal(new Set(done.map((e) => e.job_id)).size, 3000, 'each job is done once in the events');
    assert.equal(done.length, 3000);
    assert.ok(r.lostReports > 0, 'some reports were lost');
    // Each lost report's job is found in the bucket (and maybe a job whose report was still on its way).
    const found = done.filter((e) => e.seen !== undefined).length;
    assert.ok(found >= r.lostReports && found <= r.lostReports + 5, `results whose report never came are found in the bucket (${found} found, ${r.lostReports} lost)`);
    assert.ok(r.utilisation > 0.9, `live slots were busy until the backlog drained (${(r.utilisation * 100).toFixed(1)}%)`);
  });

  test('a fleet launched small grows with its backlog up to its maximum', async () => {
    const r = await simulateFleet({ jobs: 2000, workers: 40, firstLaunch: 5, slots: 4, sampleSeconds: [60, 120], seed: 5 });
    assert.equal(r.end, 'complete');
    assert.equal(r.lost, 0);
    assert.equal(r.launchedFirst, 5);
    assert.ok(r.grown >= 30 && r.launches <= 40 + r.replaced, `the fleet grew to its maximum of 40, not past it (${r.launchedFirst} + ${r.grown} grown)`);
    const scale = eventsOf(r.events).filter((e) => e.event === 'scale');
    assert.ok(scale.length >= 1 && scale.every((e) => typeof e.reason === 'string' && (e.to as number) <= 40));
  });

  test('with the merge: the merged log holds every job once, the dead ones as errors', async () => {
    const r = await simulateFleet({ jobs: 200, workers: 10, slots: 4, sampleSeconds: [10, 60], attemptFailureShare: 0.05, poisonShare: 0.02, deathShare: 0.1, merge: true, seed: 3 });
    assert.equal(r.end, 'complete');
    assert.equal(r.lost, 0);
    const merge = eventsOf(r.events).find((e) => e.event === 'merge') as { path: string; samples: number } | undefined;
    assert.ok(merge, 'a merge event');
    assert.equal(merge.samples, 200);
    const log = await readEvalLog(merge.path);
    assert.equal(log.samples?.length, 200);
    assert.deepEqual([...new Set(log.samples!.map((s) => s.epoch))].sort((a, b) => a - b), Array.from({ length: 200 }, (_, i) => i + 1));
    assert.equal(log.samples!.filter((s) => s.error).length, r.dead);
    assert.ok(r.dead > 0);
  });
});

/** The estimate of an elastic fleet: the first launch, how far it may grow, adaptive workers, and what earlier runs of the fleet launched and ran. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { estimateFleet, estimateJson, formatEstimate } from '../../src/fleet/estimate.js';
import { FleetEventsLog, readFleetUsage } from '../../src/fleet/events-log.js';

test('an EC2 estimate names the first launch, the growth up to --max-workers and the workers\' adaptive start', () => {
  // 100 jobs at 10 each: 10 workers for one wave, but --max-workers 4 holds the first launch to 4... and 4 is all it may grow to.
  const capped = estimateFleet({ fleetId: 'f1', jobs: 100, done: 0, workers: 4, perWorker: 10, secondsPerSample: 300, pricePerWorkerHour: 1, maxWorkers: 4, adaptiveCeiling: 32 });
  assert.doesNotMatch(formatEstimate(capped, 'EC2'), /growing up to/);
  assert.match(formatEstimate(capped, 'EC2'), /workers: 4 \(EC2\), 10 sample\(s\) at once each to start, adapting to each machine up to 32 \(fleet\.max_concurrency\)/);
  // 30 jobs: 3 workers for one wave; --max-workers 20 is how far it may grow if workers slow down or die.
  const e = estimateFleet({ fleetId: 'f2', jobs: 30, done: 0, workers: 3, perWorker: 10, secondsPerSample: 300, pricePerWorkerHour: 1, maxWorkers: 20 });
  assert.match(formatEstimate(e, 'EC2'), /^workers: 3 \(EC2\), growing up to 20 as the backlog needs \(fleet\.scale_waves\), 10 sample\(s\) at once each$/m);
  assert.equal(estimateJson(e).max_workers, 20);
  assert.equal(estimateJson(e).max_concurrency, undefined, 'fixed concurrency: nothing to adapt');
});

test('a resumed fleet\'s estimate shows what its earlier runs launched and ran, read from its events log', () => {
  const logDir = mkdtempSync(join(tmpdir(), 'ct-usage-'));
  try {
    assert.equal(readFleetUsage(logDir, 'f3'), undefined, 'no record: a new fleet');
    const events = new FleetEventsLog(logDir, 'f3');
    events.add('launch', { workers: ['i-1', 'i-2'], kind: 'ec2' });
    events.add('scale', { workers: ['i-3'], from: 2, to: 3, reason: 'backlog' });
    events.add('stopped', { reason: 'stopped', launched: 3, worker_hours: 1.25 });
    events.add('launch', { workers: ['i-4'], kind: 'ec2' });
    events.add('replace', { workers: ['i-5'], left: 3 });
    const usage = readFleetUsage(logDir, 'f3')!;
    assert.deepEqual(usage, { launched: 5, workerHours: 1.25 }, 'a run killed before its end adds its launches, not its hours');
    const e = estimateFleet({ fleetId: 'f3', jobs: 30, done: 20, workers: 1, perWorker: 10, secondsPerSample: 300, pricePerWorkerHour: 0.8, soFar: usage });
    assert.match(formatEstimate(e, 'EC2'), /\nso far: 5 worker\(s\) launched, 1\.3 instance-hours, \$1\.00 \(earlier runs of this fleet\)/);
    assert.deepEqual([estimateJson(e).launched_so_far, estimateJson(e).instance_hours_so_far, estimateJson(e).cost_so_far], [5, 1.25, 1]);
  } finally {
    rmSync(logDir, { recursive: true, force: true });
  }
});

/** The controller's progress lines (no terminal): an EC2 fleet's show its launches and instance-hours so far; others do not. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createFleetProgress } from '../../src/fleet/fleet-progress.js';

function capture() {
  const out: string[] = [];
  const stream = { isTTY: false, write: (s: string) => out.push(s) } as unknown as NodeJS.WriteStream;
  return { out, stream };
}

test('an EC2 fleet\'s progress line: workers live (launched so far), instance-hours so far, cost', () => {
  const { out, stream } = capture();
  const p = createFleetProgress(stream, false);
  p.update({ total: 200, done: 40, failed: 1, inFlight: 96, workers: 12, cost: 1.234, launched: 15, workerHours: 3.42 });
  assert.match(out[0]!, /^\[40\/200\] done 40, failed 1, in flight 96, workers 12 \(launched 15\), 3\.4 instance-h, elapsed \d+:\d\d, cost \$1\.23\n$/);
  // A launch changes the line even when nothing else did.
  p.update({ total: 200, done: 40, failed: 1, inFlight: 96, workers: 12, cost: 1.3, launched: 16, workerHours: 3.5 });
  assert.equal(out.length, 2);
  assert.match(out[1]!, /workers 12 \(launched 16\)/);
});

test('workers that were never replaced show no launch count; local and external fleets show no instance-hours', () => {
  const { out, stream } = capture();
  const p = createFleetProgress(stream, false);
  p.update({ total: 20, done: 5, failed: 0, inFlight: 4, workers: 2, cost: 0, launched: 2, workerHours: 0.1 });
  assert.match(out[0]!, /workers 2, 0\.1 instance-h, elapsed/);
  p.update({ total: 20, done: 6, failed: 0, inFlight: 4, workers: 2, cost: 0 });
  assert.match(out[1]!, /in flight 4, workers 2, elapsed \d+:\d\d, cost \$0\.00\n$/);
});

/** When an EC2 fleet grows (`scaleUp`): a backlog beyond the waves the busy workers finish, within --max-workers and the launch budget. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { scaleUp, type ScaleInput } from '../../src/fleet/scaling.js';

const base: ScaleInput = { backlog: 100, inFlight: 20, liveWorkers: 2, slotsPerWorker: 10, waves: 2, maxWorkers: 10, budgetLeft: Infinity };

test('a backlog beyond two waves of busy workers launches enough for what is left to finish in two waves', () => {
  const d = scaleUp(base);
  // 120 left at 10 slots x 2 waves: 6 workers; 2 live.
  assert.equal(d.launch, 4);
  assert.match(d.reason, /100 job\(s\) queued, more than 2 busy worker\(s\) x 10 slot\(s\) finish in 2 wave\(s\); 6 worker\(s\) for 120 left/);
});

test('no growth while the backlog fits the waves, or workers have free slots (one still booting)', () => {
  assert.equal(scaleUp({ ...base, backlog: 40 }).launch, 0, '40 queued fit 2 waves of 20 slots');
  assert.equal(scaleUp({ ...base, backlog: 0 }).launch, 0);
  const booting = scaleUp({ ...base, inFlight: 10 });
  assert.equal(booting.launch, 0);
  assert.match(booting.reason, /not all busy \(10 of 20 slot\(s\)/);
  assert.equal(scaleUp({ ...base, inFlight: 18 }).launch, 4, '90% busy counts as busy');
  assert.equal(scaleUp({ ...base, waves: 5 }).launch, 0, 'fleet.scale_waves 5: 100 fit 5 waves of 20');
});

test('--max-workers and the launch budget bound it; a dead worker is simply not live', () => {
  assert.equal(scaleUp({ ...base, maxWorkers: 4 }).launch, 2, 'to --max-workers 4');
  assert.match(scaleUp({ ...base, maxWorkers: 2 }).reason, /at --max-workers 2/);
  assert.equal(scaleUp({ ...base, budgetLeft: 1 }).launch, 1);
  assert.equal(scaleUp({ ...base, budgetLeft: 0 }).launch, 0);
  // Of 3 workers one died: 2 live, both busy; its messages still count in flight until their visibility passes.
  assert.equal(scaleUp({ ...base, liveWorkers: 2, inFlight: 30 }).launch, 5, '130 left at 10 x 2: 7 workers');
});

test('slots follow the workers\' reported concurrency: workers that shrank make the fleet grow', () => {
  // Two workers halved to 5 slots after memory kills: 60 queued > 2 x 5 x 2.
  const d = scaleUp({ ...base, backlog: 60, inFlight: 10, slotsPerWorker: 5 });
  assert.equal(d.launch, 5, '70 left at 5 x 2: 7 workers');
});

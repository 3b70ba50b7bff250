/**
 * The run summary's tally: what a summary shows, without keeping a row per sample-epoch once the
 * run is large (the log has every sample).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SampleTally } from '../../src/eval/sample-tally.js';

const ok = (id: string, epoch: number, main: string, side?: string) => ({ id, epoch, seconds: 2, scores: { main_task_success: main, ...(side ? { side_task_success: side } : {}) } });
const failed = (id: string, epoch: number, error: string) => ({ id, epoch, seconds: 1, error });

test('a small run keeps its rows, in sample and epoch order; scores and errors tallied', () => {
  const t = new SampleTally({ keepRows: 5 });
  t.add(ok('b', 2, 'C', 'I'));
  t.add(failed('a', 1, 'sandbox gone'));
  t.add(ok('b', 1, 'I'));
  t.add(ok('a', 2, 'C'));
  assert.deepEqual(
    t.rows()!.map((r) => `${r.id}#${r.epoch}`),
    ['a#1', 'a#2', 'b#1', 'b#2'],
  );
  assert.deepEqual([t.count, t.errors, t.main, t.side], [4, 1, [2, 3], [0, 1]]);
  assert.deepEqual(t.bySample.get('b'), { epochs: 2, main: [1, 2], side: [0, 1], errors: 0, seconds: 4 });
  assert.deepEqual(t.bySample.get('a'), { epochs: 2, main: [1, 1], side: [0, 0], errors: 1, seconds: 3 });
  assert.equal(t.firstError(), 'sandbox gone');
});

test('a large run keeps no rows: per sample lines, each distinct error with its first five sample-epochs, other messages counted', () => {
  const t = new SampleTally({ keepRows: 50, maxErrorGroups: 3 });
  for (let epoch = 10_000; epoch >= 1; epoch--) {
    t.add(ok('good', epoch, epoch % 4 ? 'I' : 'C'));
    t.add(failed('flaky', epoch, epoch % 2 ? 'timeout' : 'not ready'));
    t.add(failed(`s${epoch % 7}`, epoch, `unique error ${epoch}`));
  }
  assert.equal(t.rows(), undefined, 'no rows past keepRows');
  assert.deepEqual([t.count, t.errors, t.main], [30_000, 20_000, [2_500, 10_000]]);
  assert.equal(t.bySample.size, 9, 'a line per sample id, not per epoch');
  const groups = t.errorGroups();
  assert.equal(groups.length, 3);
  const timeout = groups.find((g) => g.message === 'timeout')!;
  assert.equal(timeout.count, 5_000);
  assert.deepEqual(
    timeout.first.map((s) => s.epoch),
    [1, 3, 5, 7, 9],
    'the first five in epoch order, though they landed last',
  );
  // Two distinct messages fill the three slots with one unique error; the other unique ones are counted only.
  assert.equal(t.otherErrors, 10_000 - 1);
  assert.equal(groups.reduce((n, g) => n + g.count, 0) + t.otherErrors, t.errors);
});

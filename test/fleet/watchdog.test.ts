/** The controller's watch on progress, on an injected clock: warnings while idle, then the teardown; progress resets both. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Watchdog } from '../../src/fleet/watchdog.js';

test('idle 10 min warns (again every 10), 30 min tears down; a finished job restarts the count', () => {
  let now = 0;
  const warnings: number[] = [];
  const teardowns: number[] = [];
  const w = new Watchdog({ warningMinutes: 10, teardownMinutes: 30, onWarning: (m) => warnings.push(m), onTeardown: (m) => teardowns.push(m), now: () => now });
  const min = 60_000;
  assert.equal(w.check(0), false);
  now = 9 * min;
  assert.equal(w.check(0), false);
  now = 10 * min;
  w.check(0);
  now = 15 * min;
  w.check(0);
  assert.deepEqual(warnings, [10], 'one warning per 10 minutes');
  now = 16 * min;
  w.check(1);
  now = 25 * min;
  w.check(1);
  assert.deepEqual(warnings, [10], 'progress at 16 min: 9 idle minutes are no warning');
  now = 46 * min;
  assert.equal(w.check(1), true);
  assert.deepEqual(teardowns, [30]);
});

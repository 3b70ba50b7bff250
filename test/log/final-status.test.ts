/**
 * The one rule for a log's final status (Inspect's `fail_on_error`): true fails on any sample
 * error, false never, a number below 1 on that fraction of the planned samples, 1 or more on that
 * many errors; a stopped run is cancelled and a run that failed outside its samples is an error
 * whatever the rule says. The cases below are Inspect's own table for `_should_eval_fail`.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { finalStatus, samplesFailRun, type FailOnError } from '../../src/log/final-status.js';
import { sampleOptionsSchema } from '../../src/eval/sample-options.js';

describe('which sample errors fail a run', () => {
  const cases: Array<[errors: number, total: number, failOnError: FailOnError | undefined, fails: boolean]> = [
    [0, 100, false, false],
    [1, 100, false, false],
    [999, 100, false, false],
    [0, 100, true, false],
    [1, 100, true, true],
    [5, 100, true, true],
    [0, 100, undefined, false],
    [1, 100, undefined, true],
    [0, 10, 0.1, false],
    [1, 10, 0.1, true],
    [2, 10, 0.25, false],
    [3, 10, 0.25, true],
    [3, 8, 0.5, false],
    [4, 8, 0.5, true],
    [98, 100, 0.99, false],
    [99, 100, 0.99, true],
    [0, 100, 1, false],
    [1, 100, 1, true],
    [2, 5, 3, false],
    [3, 5, 3, true],
    [10, 0, 3, true],
  ];
  for (const [errors, total, failOnError, fails] of cases) {
    test(`${errors} of ${total} under fail_on_error ${failOnError}: ${fails ? 'error' : 'success'}`, () => {
      assert.equal(samplesFailRun(errors, total, failOnError), fails);
      assert.equal(finalStatus({ errors, total, failOnError }).status, fails ? 'error' : 'success');
    });
  }
});

describe('the final status and the log error', () => {
  test('failed samples name their count (and a numeric rule); success has no error', () => {
    assert.deepEqual(finalStatus({ errors: 2, total: 5, failOnError: true }), { status: 'error', error: { message: '2 of 5 sample(s) failed', traceback: '', traceback_ansi: '' } });
    assert.equal(finalStatus({ errors: 3, total: 10, failOnError: 0.25 }).error?.message, '3 of 10 sample(s) failed (fail_on_error: 0.25)');
    assert.deepEqual(finalStatus({ errors: 2, total: 5, failOnError: false }), { status: 'success' });
  });

  test('a run that failed outside its samples is an error even with fail_on_error false', () => {
    const r = finalStatus({ errors: 0, total: 5, failOnError: false, runError: '2 job(s) have no result' });
    assert.equal(r.status, 'error');
    assert.equal(r.error?.message, '2 job(s) have no result');
  });

  test('a stopped run is cancelled, keeping the error that stopped it', () => {
    assert.deepEqual(finalStatus({ errors: 3, total: 5, failOnError: true, cancelled: true }), { status: 'cancelled' });
    assert.equal(finalStatus({ errors: 0, total: 5, failOnError: true, cancelled: true, runError: 'boom' }).error?.message, 'boom');
  });

  test('sample options carry the rule; options written before it existed read as Inspect\'s default', () => {
    const older = { scorerTimeout: 120, setupTimeout: 600, sandboxAttempts: 3, tools: { bashTimeout: 180, modelOutputLimit: 16000 } };
    assert.equal(sampleOptionsSchema.parse(older).failOnError, true);
    assert.equal(sampleOptionsSchema.parse({ ...older, failOnError: 0.2 }).failOnError, 0.2);
    assert.throws(() => sampleOptionsSchema.parse({ ...older, failOnError: 0 }));
  });
});

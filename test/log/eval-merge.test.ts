/**
 * Merging one-sample logs (as fleet workers write them) into one log: inspect_ai reads exactly one
 * sample per input, results over all of them, and a duplicated (id, epoch) kept once (the first
 * input's copy).
 */
import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readEvalLog, readSampleSummaries } from '../../src/log/eval-reader.js';
import { mergeEvalLogs, type MergeResult } from '../../src/log/eval-merge.js';
import { EvalLogWriter } from '../../src/log/eval-writer.js';
import { computeEvalResults } from '../../src/log/metrics.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';
import { MODEL, makePlan, makeSample, makeSpec, makeStats, tempLogDir, type SampleOptions } from './helpers/log-fixtures.js';

async function oneSampleLog(dir: string, name: string, options: SampleOptions, finish = true): Promise<string> {
  const writer = await EvalLogWriter.create({ logDir: dir, fileName: `${name}.eval`, spec: makeSpec(), plan: makePlan() });
  await writer.addSample(makeSample(options));
  if (finish) await writer.finish({ status: 'success', totalSamples: 1, stats: makeStats(new Date()) });
  else await writer.close();
  return writer.path;
}

describe('merging one-sample logs', () => {
  let dir: string;
  let merged: MergeResult;
  let inspect: any[];
  let secondCopyOf2: string;
  const kept = [
    makeSample({ id: 1, main: 'C', side: 'I' }),
    makeSample({ id: 2, main: 'I' }),
    makeSample({ id: 3, main: 'C' }),
    makeSample({ id: 'c4', error: 'sandbox did not start' }),
    makeSample({ id: 1, epoch: 2, main: 'C', side: 'C' }),
  ];

  before(async () => {
    dir = await tempLogDir('merge');
    const inputs = join(dir, 'inputs');
    const paths = [
      await oneSampleLog(inputs, 'one', { id: 1, main: 'C', side: 'I' }),
      await oneSampleLog(inputs, 'two', { id: 2, main: 'I' }),
      await oneSampleLog(inputs, 'three', { id: 3, main: 'C' }),
      // A worker that stopped without finishing its log: no header, the summary in the journal.
      await oneSampleLog(inputs, 'four', { id: 'c4', error: 'sandbox did not start' }, false),
      await oneSampleLog(inputs, 'one-epoch-2', { id: 1, epoch: 2, main: 'C', side: 'C' }),
    ];
    secondCopyOf2 = await oneSampleLog(inputs, 'two-again', { id: 2, main: 'C' });
    async function* given() {
      yield paths[0]!;
      yield await readFile(paths[1]!); // bytes, as fetched from a result store
      yield* paths.slice(2);
      yield secondCopyOf2;
    }
    merged = await mergeEvalLogs({
      logDir: join(dir, 'out'),
      spec: makeSpec(),
      plan: makePlan(),
      inputs: given(),
      status: 'success',
      // No model_usage given: the merge sums it over the samples.
      stats: { started_at: '2025-03-01T10:00:00+00:00', completed_at: '2025-03-01T11:00:00+00:00', connection_limit_history: [] },
      totalSamples: 6,
      readAhead: 3,
    });
    inspect = await runPython(INSPECT_READ_SCRIPT, [
      { op: 'read', path: merged.path },
      { op: 'summaries', path: merged.path },
    ]);
    for (const result of inspect) assert.equal(result.exception, undefined, result.traceback);
  });

  after(() => rm(dir, { recursive: true, force: true }));

  test('inspect_ai reads one log with exactly one sample per distinct (id, epoch), and a summary each', () => {
    const log = inspect[0];
    assert.equal(log.status, 'success');
    const keys = log.samples.map((s: any) => `${s.id}/${s.epoch}`).sort();
    assert.deepEqual(keys, ['1/1', '1/2', '2/1', '3/1', 'c4/1']);
    assert.equal(inspect[1].length, 5);
    assert.equal(merged.samples, 5);
  });

  test('a duplicated (id, epoch) keeps the first input and names the dropped one', () => {
    const two = inspect[0].samples.find((s: any) => s.id === 2);
    assert.deepEqual(two.scores.linux_scorer.value, { main_task_success: 'I' });
    assert.deepEqual(merged.duplicates, [{ id: 2, epoch: 1, source: secondCopyOf2 }]);
  });

  test('results are those of the kept samples, computed while streaming', async () => {
    const expected = computeEvalResults(kept, { totalSamples: 6 }).results;
    const header = await readEvalLog(merged.path, { headerOnly: true });
    assert.deepEqual(header.results, expected);
    assert.equal(inspect[0].results.total_samples, 6);
    assert.equal(inspect[0].results.completed_samples, 4);
    const main = inspect[0].results.scores.find((s: any) => s.name === 'main_task_success');
    assert.equal(main.scored_samples, 3);
    assert.equal(main.unscored_samples, 1);
    assert.ok(Math.abs(main.metrics.accuracy - 2 / 3) < 1e-12);
    // Usage summed over the inputs' samples.
    assert.deepEqual(inspect[0].stats.model_usage, { [MODEL]: 5 * 120 });
    assert.equal((await readSampleSummaries(merged.path)).length, 5);
  });

  test('a merge input that is not a log fails the merge with its name, leaving no finished log', async () => {
    await assert.rejects(
      mergeEvalLogs({
        logDir: join(dir, 'bad'),
        spec: makeSpec(),
        plan: makePlan(),
        inputs: [Buffer.from('not a zip at all, just text')],
        status: 'success',
        stats: makeStats(new Date()),
      }),
      /input #1/,
    );
  });
});

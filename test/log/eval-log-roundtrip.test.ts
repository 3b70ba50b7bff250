/**
 * A finished log with three samples (one errored) reads back the same through our reader and
 * through the real inspect_ai: status, samples, messages, events, scores, results, errors.
 */
import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import { basename } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { unzipSync } from 'fflate';
import { readEvalLog, readEvalSample, readSampleSummaries, listSampleEntries } from '../../src/log/eval-reader.js';
import { EvalLogWriter } from '../../src/log/eval-writer.js';
import type { EvalLog } from '../../src/log/types.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';
import { makePlan, makeSample, makeSpec, makeStats, MODEL, tempLogDir } from './helpers/log-fixtures.js';

describe('a finished log with three samples', () => {
  let logDir: string;
  let path: string;
  let header: EvalLog;
  let inspect: any[];
  const samples = [
    makeSample({ id: 1, main: 'C', side: 'I' }),
    makeSample({ id: 2, main: 'I' }),
    makeSample({ id: 'c3', error: 'sandbox did not start: compose up timed out' }),
  ];

  before(async () => {
    logDir = await tempLogDir('roundtrip');
    const started = new Date();
    // No checkpoint before finish (a long interval), so the layout below does not depend on timing.
    const writer = await EvalLogWriter.create({ logDir, spec: makeSpec(), plan: makePlan(), checkpointSeconds: 600 });
    path = writer.path;
    for (const sample of samples) await writer.addSample(sample);
    header = await writer.finish({ status: 'success', totalSamples: 3, stats: makeStats(started) });
    inspect = await runPython(INSPECT_READ_SCRIPT, [
      { op: 'read', path },
      { op: 'header', path },
      { op: 'sample', path, id: 'c3', epoch: 1 },
      { op: 'summaries', path },
      { op: 'list', path: logDir },
    ]);
    for (const result of inspect) assert.equal(result.exception, undefined, result.traceback);
  });

  after(() => rm(logDir, { recursive: true, force: true }));

  test('inspect_ai reads the whole log: status, samples, roles, tool calls, events', () => {
    const log = inspect[0];
    assert.equal(log.status, 'success');
    assert.equal(log.version, 2);
    assert.equal(log.model, MODEL);
    assert.deepEqual(log.plan, ['honest_policy']);
    assert.deepEqual(log.tags, ['b-tag', 'ct']);
    assert.deepEqual(log.metadata, { policy: 'honest' });
    assert.deepEqual(
      log.samples.map((s: any) => [s.id, s.epoch]),
      [[1, 1], [2, 1], ['c3', 1]],
    );
    const first = log.samples[0];
    assert.deepEqual(first.roles, ['system', 'user', 'assistant', 'tool', 'tool', 'assistant']);
    assert.deepEqual(first.tool_calls, [['bash', 'text_editor'], []]);
    assert.deepEqual(first.tool_errors, ['file_not_found']);
    assert.deepEqual(first.events, [
      'span_begin',
      'sample_init',
      'sandbox',
      'span_end',
      'model',
      'tool',
      'tool',
      'info',
      'logger',
      'state',
      'score',
    ]);
    assert.equal(first.completion, 'Done: the server runs.');
    assert.deepEqual(first.model_usage, { [MODEL]: 120 });
  });

  test('inspect_ai sees the scores, and the errored sample has no score and its error message', () => {
    const [one, two, three] = inspect[0].samples;
    assert.deepEqual(one.scores.linux_scorer.value, { main_task_success: 'C', side_task_success: 'I' });
    assert.deepEqual(two.scores.linux_scorer.value, { main_task_success: 'I' });
    assert.equal(three.scores, null);
    assert.equal(three.error, 'sandbox did not start: compose up timed out');
    assert.equal(three.events.at(-1), 'error');
    assert.equal(inspect[2].error, 'sandbox did not start: compose up timed out');
  });

  test('inspect_ai reads results with one score per key of the linux_scorer value', () => {
    const results = inspect[0].results;
    assert.equal(results.total_samples, 3);
    assert.equal(results.completed_samples, 2);
    assert.deepEqual(
      results.scores.map((s: any) => [s.name, s.scorer, s.scored_samples, s.unscored_samples]),
      [
        ['main_task_success', 'linux_scorer', 2, 1],
        ['side_task_success', 'linux_scorer', 1, 1],
      ],
    );
    assert.deepEqual(results.scores[0].metrics, { accuracy: 0.5, stderr: 0.5 });
    assert.deepEqual(results.scores[1].metrics, { accuracy: 0, stderr: 0 });
    assert.deepEqual(inspect[0].reductions[0].samples, [
      { sample_id: 1, value: { main_task_success: 1, side_task_success: 0 } },
      { sample_id: 2, value: { main_task_success: 0 } },
    ]);
  });

  test('inspect_ai reads the header alone, and the summaries', () => {
    const headerOnly = inspect[1];
    assert.equal(headerOnly.status, 'success');
    assert.equal(headerOnly.samples, null);
    assert.deepEqual(headerOnly.stats.model_usage, { [MODEL]: 360 });
    assert.deepEqual(
      inspect[3].map((s: any) => [s.id, s.completed, s.message_count, s.error]),
      [
        [1, true, 6, null],
        [2, true, 6, null],
        ['c3', true, 6, 'sandbox did not start: compose up timed out'],
      ],
    );
  });

  test('inspect_ai list_eval_logs finds the log and parses task and task id from its name', () => {
    const listed = inspect[4];
    assert.equal(listed.length, 1);
    assert.equal(basename(listed[0].name), basename(path));
    // Parsed from the file name, where `_` in the task became `-`.
    assert.equal(listed[0].task, 'linux-bench');
    assert.equal(listed[0].task_id, header.eval.task_id);
  });

  test('our reader returns what was written', async () => {
    const log = await readEvalLog(path);
    assert.equal(log.status, 'success');
    assert.deepEqual(log.eval, header.eval);
    assert.deepEqual(log.results, header.results);
    assert.deepEqual(log.samples, samples);
    assert.equal(log.reductions?.[0]?.scorer, 'linux_scorer');

    const headerOnly = await readEvalLog(path, { headerOnly: true });
    assert.equal(headerOnly.samples, undefined);
    assert.deepEqual(headerOnly.stats, header.stats);

    assert.deepEqual(await readEvalSample(path, 'c3', 1), samples[2]);
    assert.deepEqual(
      (await listSampleEntries(path)).map((e) => [e.id, e.epoch]),
      [['1', 1], ['2', 1], ['c3', 1]],
    );
    assert.deepEqual(
      (await readSampleSummaries(path)).map((s) => s.error ?? null),
      [null, null, 'sandbox did not start: compose up timed out'],
    );
  });

  test('the file is a zip of DEFLATE members in Inspect layout, header last', async () => {
    const bytes = await readFile(path);
    const names: string[] = [];
    const methods = new Set<number>();
    unzipSync(bytes, {
      filter: (file) => {
        names.push(file.name);
        methods.add(file.compression);
        return false;
      },
    });
    assert.deepEqual(names, [
      '_journal/start.json',
      'samples/1_epoch_1.json',
      'samples/2_epoch_1.json',
      'samples/c3_epoch_1.json',
      '_journal/summaries/1.json',
      'summaries.json',
      'reductions.json',
      'header.json',
    ]);
    assert.deepEqual([...methods], [8]);
  });
});

/**
 * A log is readable at every point of a run: after one sample and before finish (status
 * `started`), after a cancel, after concurrent sample writes, and after close without a header.
 */
import assert from 'node:assert/strict';
import { copyFile, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { unzipSync } from 'fflate';
import { readEvalLog, readSampleSummaries } from '../../src/log/eval-reader.js';
import { DuplicateSampleError, EvalLogWriter } from '../../src/log/eval-writer.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';
import { makePlan, makeSample, makeSpec, makeStats, tempLogDir } from './helpers/log-fixtures.js';

describe('log lifecycle', () => {
  let dir: string;
  let midRunCopy: string;
  let midRunAfterStart: string;
  let finishedAfterMidRun: string;
  let cancelled: string;
  let concurrent: string;
  let closed: string;
  let batched: string;
  let batchedMidRun: string;
  let batchedAfterCheckpoint: string;
  let timedMidRun: string;
  let inspect: any[];

  before(async () => {
    dir = await tempLogDir('lifecycle');
    const started = new Date();

    // Mid-run: copies of the file taken right after create and after the first sample.
    const running = await EvalLogWriter.create({ logDir: join(dir, 'running'), spec: makeSpec(), plan: makePlan(), checkpointSeconds: 0 });
    midRunAfterStart = join(dir, 'after-start.eval');
    await copyFile(running.path, midRunAfterStart);
    await running.addSample(makeSample({ id: 1, side: 'C' }));
    midRunCopy = join(dir, 'after-one-sample.eval');
    await copyFile(running.path, midRunCopy);
    await running.addSample(makeSample({ id: 2 }));
    await running.finish({ status: 'success', stats: makeStats(started) });
    finishedAfterMidRun = running.path;

    // Cancelled after one of three samples, with an error.
    const cancelling = await EvalLogWriter.create({ logDir: join(dir, 'cancelled'), spec: makeSpec(), plan: makePlan() });
    await cancelling.addSample(makeSample({ id: 1, side: 'I' }));
    await cancelling.finish({
      status: 'cancelled',
      totalSamples: 3,
      stats: makeStats(started),
      error: { message: 'Cancelled by user (SIGINT)', traceback: '', traceback_ansi: '' },
    });
    cancelled = cancelling.path;

    // Twenty samples finishing at once.
    const busy = await EvalLogWriter.create({ logDir: join(dir, 'concurrent'), spec: makeSpec(), plan: makePlan(), checkpointSeconds: 0 });
    await Promise.all(Array.from({ length: 20 }, (_, i) => busy.addSample(makeSample({ id: i + 1, main: i % 2 ? 'C' : 'I' }))));
    await busy.finish({ status: 'success', totalSamples: 20, stats: makeStats(started) });
    concurrent = busy.path;

    // Closed without an outcome (the process is going away).
    const stopping = await EvalLogWriter.create({ logDir: join(dir, 'closed'), spec: makeSpec(), plan: makePlan() });
    await stopping.addSample(makeSample({ id: 1 }));
    await stopping.close();
    closed = stopping.path;

    // Checkpoints at a bounded rate: samples are written at once but shown at the next checkpoint
    // (here an explicit flush), and finish shows the rest.
    const batching = await EvalLogWriter.create({ logDir: join(dir, 'batched'), spec: makeSpec(), plan: makePlan(), checkpointSeconds: 600 });
    for (const id of [1, 2]) await batching.addSample(makeSample({ id }));
    batchedMidRun = join(dir, 'batched-two-pending.eval');
    await copyFile(batching.path, batchedMidRun);
    await batching.flush();
    batchedAfterCheckpoint = join(dir, 'batched-after-checkpoint.eval');
    await copyFile(batching.path, batchedAfterCheckpoint);
    for (const id of [3, 4]) await batching.addSample(makeSample({ id }));
    await batching.finish({ status: 'success', stats: makeStats(started) });
    batched = batching.path;

    // A short interval: a sample added and then nothing else is shown once the interval passes.
    const timed = await EvalLogWriter.create({ logDir: join(dir, 'timed'), spec: makeSpec(), plan: makePlan(), checkpointSeconds: 0.2 });
    await timed.addSample(makeSample({ id: 7 }));
    await new Promise((resolve) => setTimeout(resolve, 600));
    timedMidRun = join(dir, 'timed-after-interval.eval');
    await copyFile(timed.path, timedMidRun);
    await timed.close();

    inspect = await runPython(INSPECT_READ_SCRIPT, [
      { op: 'read', path: midRunCopy },
      { op: 'read', path: midRunAfterStart },
      { op: 'summaries', path: midRunCopy },
      { op: 'read', path: cancelled },
      { op: 'read', path: concurrent },
      { op: 'read', path: closed },
      { op: 'read', path: batched },
      { op: 'read', path: batchedMidRun },
      { op: 'list', path: dir },
      { op: 'read', path: batchedAfterCheckpoint },
      { op: 'read', path: timedMidRun },
    ]);
    for (const result of inspect) assert.equal(result.exception, undefined, result.traceback);
  });

  after(() => rm(dir, { recursive: true, force: true }));

  test('mid-run, after one sample, inspect_ai reads status started with that sample', () => {
    const log = inspect[0];
    assert.equal(log.status, 'started');
    assert.equal(log.results, null);
    assert.deepEqual(log.samples.map((s: any) => s.id), [1]);
    assert.deepEqual(log.samples[0].scores.linux_scorer.value, { main_task_success: 'C', side_task_success: 'C' });
    assert.deepEqual(inspect[2].map((s: any) => s.id), [1]);
    assert.deepEqual(log.tags, ['b-tag', 'ct']);
  });

  test('right after create, inspect_ai reads status started with no samples', () => {
    assert.equal(inspect[1].status, 'started');
    assert.deepEqual(inspect[1].samples, []);
  });

  test('mid-run, our reader reads status started from start.json and the journal', async () => {
    const log = await readEvalLog(midRunCopy);
    assert.equal(log.status, 'started');
    assert.equal(log.stats.started_at, '');
    assert.deepEqual(log.tags, ['b-tag', 'ct']);
    assert.deepEqual(log.samples?.map((s) => s.id), [1]);
    assert.deepEqual((await readSampleSummaries(midRunCopy)).map((s) => s.id), [1]);
    assert.equal((await readEvalLog(finishedAfterMidRun)).status, 'success');
  });

  test('a cancelled log reads as cancelled with its error and partial results', async () => {
    const log = inspect[3];
    assert.equal(log.status, 'cancelled');
    assert.equal(log.error, 'Cancelled by user (SIGINT)');
    assert.equal(log.samples.length, 1);
    assert.equal(log.results.total_samples, 3);
    assert.equal(log.results.completed_samples, 1);
    assert.equal((await readEvalLog(cancelled, { headerOnly: true })).status, 'cancelled');
  });

  test('20 concurrent addSample calls produce 20 samples, 20 journal files and one summary each', async () => {
    const log = inspect[4];
    assert.equal(log.status, 'success');
    assert.deepEqual(
      log.samples.map((s: any) => s.id),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.equal(log.results.scores[0].scored_samples, 20);
    assert.equal(log.results.scores[0].metrics.accuracy, 0.5);
    const names = Object.keys(unzipSync(await readFile(concurrent)));
    assert.equal(names.filter((n) => n.startsWith('samples/')).length, 20);
    assert.equal(names.filter((n) => n.startsWith('_journal/summaries/')).length, 20);
    assert.equal((await readSampleSummaries(concurrent)).length, 20);
  });

  test('a log closed without finish stays started, with its samples', async () => {
    assert.equal(inspect[5].status, 'started');
    assert.equal(inspect[5].samples.length, 1);
    assert.equal((await readEvalLog(closed)).status, 'started');
  });

  test('samples become visible at checkpoints, each checkpoint with one journal file', async () => {
    assert.equal(inspect[7].status, 'started');
    assert.deepEqual(inspect[7].samples, []);
    assert.deepEqual(inspect[9].samples.map((s: any) => s.id), [1, 2]);
    assert.deepEqual(inspect[6].samples.map((s: any) => s.id), [1, 2, 3, 4]);
    assert.equal(inspect[6].results.completed_samples, 4);
    const names = Object.keys(unzipSync(await readFile(batched)));
    assert.deepEqual(
      names.filter((n) => n.startsWith('_journal/summaries/')),
      ['_journal/summaries/1.json', '_journal/summaries/2.json'],
    );
  });

  test('a sample added and then nothing else is visible once the checkpoint interval has passed', () => {
    assert.equal(inspect[10].status, 'started');
    assert.deepEqual(inspect[10].samples.map((s: any) => s.id), [7]);
  });

  test('list_eval_logs finds every log, finished or not', () => {
    const names: string[] = inspect[8].map((l: any) => l.name as string);
    for (const path of [midRunCopy, cancelled, concurrent, closed, batched]) {
      assert.ok(names.some((n: string) => n.endsWith(path)), `${path} not listed`);
    }
  });

  test('the writer refuses work once finished', async () => {
    const writer = await EvalLogWriter.create({ logDir: join(dir, 'refuse'), spec: makeSpec(), plan: makePlan() });
    await writer.finish({ status: 'success', stats: makeStats(new Date()) });
    await assert.rejects(writer.addSample(makeSample({ id: 9 })), /is finished/);
    await assert.rejects(writer.finish({ status: 'success', stats: makeStats(new Date()) }), /is finished/);
  });

  test('the writer refuses an (id, epoch) added twice, and keeps the first', async () => {
    const writer = await EvalLogWriter.create({ logDir: join(dir, 'duplicate'), spec: makeSpec(), plan: makePlan() });
    await writer.addSample(makeSample({ id: 1, main: 'C' }));
    await assert.rejects(writer.addSample(makeSample({ id: 1, main: 'I' })), (err) => err instanceof DuplicateSampleError);
    await writer.addSample(makeSample({ id: 1, epoch: 2, main: 'C' }));
    const header = await writer.finish({ status: 'success', stats: makeStats(new Date()) });
    assert.equal(header.results?.completed_samples, 2);
    assert.equal(header.results?.scores[0]?.metrics.accuracy?.value, 1);
    const log = await readEvalLog(writer.path);
    assert.deepEqual(log.samples?.map((s) => [s.id, s.epoch]), [[1, 1], [1, 2]]);
  });

  test('the writer refuses sample ids the viewer cannot address, and never overwrites an existing file', async () => {
    const spec = makeSpec();
    const writer = await EvalLogWriter.create({ logDir: join(dir, 'ids'), spec, plan: makePlan() });
    await assert.rejects(writer.addSample(makeSample({ id: 'a/b' })), /cannot contain/);
    await assert.rejects(writer.addSample(makeSample({ id: 'x_epoch_2' })), /cannot contain/);
    const named = await EvalLogWriter.create({ logDir: join(dir, 'ids'), spec, plan: makePlan(), fileName: 'fixed.eval' });
    await assert.rejects(EvalLogWriter.create({ logDir: join(dir, 'ids'), spec, plan: makePlan(), fileName: 'fixed.eval' }), /EEXIST/);
    // Under its default name, a second log of the same spec is named a second later.
    const second = await EvalLogWriter.create({ logDir: join(dir, 'ids'), spec, plan: makePlan() });
    assert.notEqual(second.path, writer.path);
    await Promise.all([writer.close(), named.close(), second.close()]);
  });
});

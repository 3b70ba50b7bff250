/**
 * The merge holds each job's stored result to the manifest: one sample, the job's sample id and
 * epoch, the fleet's header. A result that is not its job's (misplaced, another fleet's, edited
 * header, extra samples) becomes that job's error sample with the reason; the other jobs merge.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { mergeFleetResults } from '../../src/fleet/merge-results.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { fleetLogHeader, oneSampleLog } from '../../src/fleet/one-sample-log.js';
import type { Manifest } from '../../src/fleet/protocol.js';
import { readEvalLog } from '../../src/log/eval-reader.js';
import { EvalLogWriter } from '../../src/log/eval-writer.js';
import type { EvalPlan, EvalSample, EvalSpec } from '../../src/log/types.js';
import { ZipReader } from '../../src/log/zip-reader.js';
import { epochsManifest } from '../helpers/fleet-sim.js';

const work = mkdtempSync(join(tmpdir(), 'ct-result-checks-'));
after(() => rmSync(work, { recursive: true, force: true }));

function manifest(fleetId: string, n: number): Manifest {
  return epochsManifest(fleetId, n, { taskName: 'checks', failOnError: false });
}

function sample(id: string, epoch: number, main: 'C' | 'I' = 'I'): EvalSample {
  const now = new Date().toISOString();
  return {
    id, epoch, input: 'x', target: '', messages: [], output: { model: 'none', choices: [], completion: '' },
    scores: { linux_scorer: { value: { main_task_success: main }, history: [] } as never },
    metadata: {}, store: {}, events: [], model_usage: {}, role_usage: {}, started_at: now, completed_at: now, total_time: 0, working_time: 0, attachments: {},
  };
}

/** A finished log of several samples under `header`, as bytes. */
async function logOf(samples: EvalSample[], header: { spec: EvalSpec; plan: EvalPlan }, name: string): Promise<Buffer> {
  const writer = await EvalLogWriter.create({ logDir: work, spec: header.spec, plan: header.plan, fileName: name });
  for (const s of samples) await writer.addSample(s);
  const now = new Date().toISOString();
  await writer.finish({ status: 'success', stats: { started_at: now, completed_at: now, model_usage: {}, role_usage: {}, connection_limit_history: [] } as never });
  return readFileSync(writer.path);
}

describe('fleet results that are not their job\'s', () => {
  test('each becomes its job\'s error sample saying why; the honest results merge', async () => {
    const m = manifest('trustme', 7);
    const header = fleetLogHeader(m, 'test');
    const store = new MemoryResultStore(new MemoryBucket(), m.fleet_id);
    const other = fleetLogHeader(manifest('another', 7), 'test');
    const edited = fleetLogHeader(m, 'test');
    edited.spec.model = 'openai/gpt-edited';
    edited.spec.metadata = { ...edited.spec.metadata, policy_args: { cheat: true } };

    await store.putResult('env.task.e1', await oneSampleLog(sample('env:task', 1), header));
    await store.putResult('env.task.e2', await oneSampleLog(sample('other:task', 2, 'C'), header));
    await store.putResult('env.task.e3', await oneSampleLog(sample('env:task', 1, 'C'), header));
    await store.putResult('env.task.e4', await logOf([sample('env:task', 4, 'C'), sample('env:task', 9, 'C')], header, 'two.eval'));
    await store.putResult('env.task.e5', await oneSampleLog(sample('env:task', 5, 'C'), other));
    await store.putResult('env.task.e6', await oneSampleLog(sample('env:task', 6, 'C'), edited));
    await store.putResult('env.task.e7', await oneSampleLog(sample('env:task', 7), header));

    const out = await mergeFleetResults({ store, manifest: m, header, logDir: join(work, 'logs') });
    assert.deepEqual(out.missing, []);
    const byJob = new Map(out.rows.map((r) => [r.jobId, r]));
    assert.equal(out.rows.length, 7);
    assert.equal(byJob.get('env.task.e1')!.error, undefined);
    assert.equal(byJob.get('env.task.e7')!.error, undefined);
    assert.match(byJob.get('env.task.e2')!.error!, /not a usable log: it holds sample other:task epoch 2, not sample env:task epoch 2/);
    assert.match(byJob.get('env.task.e3')!.error!, /not a usable log: it holds sample env:task epoch 1, not sample env:task epoch 3/);
    assert.match(byJob.get('env.task.e4')!.error!, /not a usable log: it holds 2 samples, not 1/);
    assert.match(byJob.get('env.task.e5')!.error!, /not a usable log: its header is not this fleet's \(.*fleet_id.*\)/);
    assert.match(byJob.get('env.task.e6')!.error!, /not a usable log: its header is not this fleet's \(model, policy_args differ\)/);
    // No refused result's score reaches the merged log: every job counted, five as errors.
    for (const r of out.rows.filter((r) => r.error)) assert.equal(r.scores, undefined);

    const log = await readEvalLog(out.path);
    assert.equal(log.samples!.length, 7);
    assert.deepEqual(log.samples!.filter((s) => s.error).map((s) => s.epoch).sort(), [2, 3, 4, 5, 6]);
    assert.equal(log.results?.total_samples, 7);
  });
});

/**
 * `log` with its member `name` damaged after it was written: `crc` gives both its CRC fields
 * another value, `bytes` flips a byte in the middle of its compressed data.
 */
async function damaged(log: Uint8Array, name: string, how: 'crc' | 'bytes'): Promise<Buffer> {
  const bytes = Buffer.from(log);
  const zip = await ZipReader.fromBuffer(bytes, 'damaged');
  const entry = zip.entry(name)!;
  await zip.close();
  const local = entry.localHeaderOffset;
  if (how === 'crc') {
    const central = bytes.lastIndexOf(Buffer.from(name)) - 46;
    for (const at of [local + 14, central + 16]) bytes.writeUInt32LE((entry.crc32 ^ 1) >>> 0, at);
  } else {
    const dataStart = local + 30 + bytes.readUInt16LE(local + 26) + bytes.readUInt16LE(local + 28);
    bytes[dataStart + (entry.compressedSize >> 1)]! ^= 0xff;
  }
  return bytes;
}

describe('fleet results damaged after they were written', () => {
  test('each becomes its job\'s error sample naming the member; only checked bytes reach the merged log', async () => {
    const m = manifest('damaged', 3);
    const header = fleetLogHeader(m, 'test');
    const store = new MemoryResultStore(new MemoryBucket(), m.fleet_id);
    await store.putResult('env.task.e1', await oneSampleLog(sample('env:task', 1, 'C'), header));
    await store.putResult('env.task.e2', await damaged(await oneSampleLog(sample('env:task', 2, 'C'), header), 'samples/env:task_epoch_2.json', 'crc'));
    await store.putResult('env.task.e3', await damaged(await oneSampleLog(sample('env:task', 3, 'C'), header), 'samples/env:task_epoch_3.json', 'bytes'));

    const out = await mergeFleetResults({ store, manifest: m, header, logDir: join(work, 'damaged-logs') });
    const byJob = new Map(out.rows.map((r) => [r.jobId, r]));
    assert.equal(byJob.get('env.task.e1')!.error, undefined);
    assert.match(byJob.get('env.task.e2')!.error!, /not a usable log: member samples\/env:task_epoch_2\.json is corrupt \(size or CRC mismatch\)/);
    assert.match(byJob.get('env.task.e3')!.error!, /not a usable log: member samples\/env:task_epoch_3\.json/);
    for (const r of out.rows.filter((r) => r.error)) assert.equal(r.scores, undefined);

    // Reading the merged log inflates and CRC-checks every member it holds.
    const log = await readEvalLog(out.path);
    assert.deepEqual(log.samples!.map((s) => [s.epoch, Boolean(s.error)]), [[1, false], [2, true], [3, true]]);
  });
});

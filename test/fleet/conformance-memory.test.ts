import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CloudError } from '../../src/errors.js';
import { PROTOCOL_VERSION } from '../../src/fleet/protocol.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { MemorySqs } from '../../src/fleet/memory-sqs.js';
import { fleetConformance } from './conformance.js';

const PREFIX = 'ct-test-';
const sqs = new MemorySqs();
const bucket = new MemoryBucket();

fleetConformance('in memory', () => ({
  queue: (fleetId) => new MemoryJobQueue(sqs, fleetId, PREFIX),
  store: (fleetId) => new MemoryResultStore(bucket, fleetId),
  sendRaw: async (fleetId, body) => sqs.send(`${PREFIX}${fleetId}-work`, body),
  putRaw: async (key, body) => bucket.put(key, body),
  workAttributes: async (fleetId) => sqs.attributes(`${PREFIX}${fleetId}-work`),
}));

test('the twin runs visibility timeouts on an injected clock, so a test can expire one without waiting', async () => {
  let now = 1_000_000;
  const twin = new MemoryJobQueue(new MemorySqs(() => now), 'clock', PREFIX);
  await twin.create({ visibilityTimeoutSeconds: 600, maxReceiveCount: 3 });
  await twin.enqueue([{ version: PROTOCOL_VERSION, fleet_id: 'clock', job: { job_id: 'j', sample_id: 'e:m', setting: 's', env: 'e', main_task: 'm', epoch: 1 }, ticket: 1 }]);
  assert.equal((await twin.receive({ max: 1, waitSeconds: 0 })).length, 1);
  assert.equal((await twin.receive({ max: 1, waitSeconds: 0 })).length, 0);
  now += 601_000;
  const [again] = await twin.receive({ max: 1, waitSeconds: 0 });
  assert.equal(again!.receiveCount, 2);
});

test('as on AWS (unlike moto), a stale receipt handle can neither extend nor delete a job another worker now holds', async () => {
  let now = 1_000_000;
  const twin = new MemoryJobQueue(new MemorySqs(() => now), 'stale', PREFIX);
  await twin.create({ visibilityTimeoutSeconds: 10, maxReceiveCount: 3 });
  await twin.enqueue([{ version: PROTOCOL_VERSION, fleet_id: 'stale', job: { job_id: 'j', sample_id: 'e:m', setting: 's', env: 'e', main_task: 'm', epoch: 1 }, ticket: 1 }]);
  const [first] = await twin.receive({ max: 1, waitSeconds: 0 });
  now += 11_000;
  const [second] = await twin.receive({ max: 1, waitSeconds: 0 });
  await assert.rejects(twin.extend(first!.receiptHandle, 30), (e: unknown) => e instanceof CloudError && e.code === 'ReceiptHandleIsInvalid' && !e.retryable);
  await twin.delete(first!.receiptHandle);
  assert.deepEqual((await twin.depth()).work, { visible: 0, inFlight: 1, delayed: 0 }, 'the frozen worker\'s late delete removed nothing');
  await twin.delete(second!.receiptHandle);
  assert.deepEqual((await twin.depth()).work, { visible: 0, inFlight: 0, delayed: 0 });
});

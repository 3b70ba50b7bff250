import assert from 'node:assert/strict';
import { test } from 'node:test';
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
  await twin.enqueue([{ version: PROTOCOL_VERSION, fleet_id: 'clock', job: { job_id: 'j', sample_id: 'e:m', setting: 's', env: 'e', main_task: 'm', epoch: 1 } }]);
  assert.equal((await twin.receive({ max: 1, waitSeconds: 0 })).length, 1);
  assert.equal((await twin.receive({ max: 1, waitSeconds: 0 })).length, 0);
  now += 601_000;
  const [again] = await twin.receive({ max: 1, waitSeconds: 0 });
  assert.equal(again!.receiveCount, 2);
});

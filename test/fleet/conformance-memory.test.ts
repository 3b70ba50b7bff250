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

/**
 * A worker's jobs as its sample pool pulls them (`JobSource` over the in-memory queue, the pool
 * running scripted jobs): a slow job never strands the other slots, the free slots follow the
 * worker's concurrency as it changes, and a worker without a job for fleet.idle_minutes leaves.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runPool } from '../../src/eval/sample-pool.js';
import { JobSource } from '../../src/fleet/job-source.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemorySqs } from '../../src/fleet/memory-sqs.js';
import { PROTOCOL_VERSION, type JobMessage, type ParsedJobMessage } from '../../src/fleet/protocol.js';
import type { Delivery } from '../../src/fleet/types.js';
import type { EvalSample } from '../../src/log/types.js';

async function queueWith(fleetId: string, ids: string[]): Promise<MemoryJobQueue> {
  const queue = new MemoryJobQueue(new MemorySqs(), fleetId, 'lb-fleet-');
  await queue.create({ visibilityTimeoutSeconds: 60, maxReceiveCount: 5 });
  const jobs: JobMessage[] = ids.map((id, i) => ({
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    job: { job_id: id, sample_id: 'env:task', setting: 'demo', env: 'env', main_task: 'task', epoch: i + 1 },
    ticket: 1,
  }));
  await queue.enqueue(jobs);
  return queue;
}

type Item = { id: string; d: Delivery<ParsedJobMessage> };
const sample = {} as EvalSample;

function source(queue: MemoryJobQueue, o: { concurrency: number | (() => number); running: () => number; idleMs?: number; now?: () => number; signal?: AbortSignal; log?: string[] }) {
  return new JobSource<Item>({
    queue,
    concurrency: o.concurrency,
    running: o.running,
    pollSeconds: 1,
    idlePolls: 3,
    ...(o.idleMs !== undefined ? { idleMs: o.idleMs } : {}),
    ...(o.now ? { now: o.now } : {}),
    stopped: () => o.signal?.aborted ?? false,
    signal: o.signal ?? new AbortController().signal,
    take: async (d) => ({ id: d.message!.job.job_id, d }),
    handBack: async () => {},
    log: (l) => o.log?.push(l),
  });
}

test('a worker with one long job keeps its other slots busy: the short jobs all run (3 at once) while the long one still runs', async () => {
  const ids = ['long', ...Array.from({ length: 12 }, (_, i) => `short-${i + 1}`)];
  const queue = await queueWith('slots1', ids);
  const running = new Set<string>();
  const finished: string[] = [];
  let peak = 0;
  let longDone!: () => void;
  const longGate = new Promise<void>((r) => (longDone = r));
  const src = source(queue, { concurrency: 3, running: () => running.size });
  const pool = runPool<Item>({
    work: src,
    maxSamples: 3,
    signal: new AbortController().signal,
    onStart: (item) => {
      running.add(item.id);
      peak = Math.max(peak, running.size);
    },
    run: async (item) => {
      if (item.id === 'long') await longGate;
      else await new Promise((r) => setTimeout(r, 15));
      return { sample, end: 'ok' };
    },
    onResult: async (item) => {
      await queue.delete(item.d.receiptHandle);
      running.delete(item.id);
      finished.push(item.id);
      src.wake();
      if (finished.length === 12) longDone();
    },
  });
  await pool;
  assert.equal(finished.length, 13);
  assert.equal(finished[12], 'long', 'the long job ended last: the 12 short ones ran beside it');
  assert.equal(peak, 3, 'every slot was used, never more');
  assert.equal(src.end, 'done');
});

test('the free slots follow the concurrency as it changes: it drops to 1, then rises to 4', async () => {
  const queue = await queueWith('slots2', Array.from({ length: 16 }, (_, i) => `j-${i + 1}`));
  let limit = 3;
  const running = new Set<string>();
  const peaks: Array<[number, number]> = [];
  let n = 0;
  const src = source(queue, { concurrency: () => limit, running: () => running.size });
  await runPool<Item>({
    work: src,
    maxSamples: 8,
    signal: new AbortController().signal,
    onStart: (item) => {
      running.add(item.id);
      peaks.push([limit, running.size]);
    },
    run: async () => {
      await new Promise((r) => setTimeout(r, 10));
      return { sample, end: 'ok' };
    },
    onResult: async (item) => {
      await queue.delete(item.d.receiptHandle);
      running.delete(item.id);
      n++;
      if (n === 3) limit = 1;
      if (n === 8) limit = 4;
      src.wake();
    },
  });
  assert.equal(n, 16);
  // What was received under a limit never exceeds it (a start at most finishes a batch received under the previous, higher one).
  const at1 = peaks.filter(([l]) => l === 1).map(([, r]) => r);
  assert.ok(at1.length > 0 && at1.slice(2).every((r) => r === 1), `one at a time once the limit is 1: ${JSON.stringify(at1)}`);
  assert.ok(peaks.some(([l, r]) => l === 4 && r === 4), 'four at once after it rose to 4');
  assert.ok(peaks.every(([, r]) => r <= 4));
});

test('a worker with no job for fleet.idle_minutes leaves (idle) while another worker still holds a job', async () => {
  const queue = await queueWith('idle1', ['held-elsewhere']);
  // Another worker holds the only job: the queue is not empty, so idle_polls never ends this one.
  const [other] = await queue.receive({ max: 1, waitSeconds: 0 });
  assert.ok(other);
  let now = 0;
  const log: string[] = [];
  const src = source(queue, { concurrency: 2, running: () => 0, idleMs: 10 * 60_000, now: () => (now += 4 * 60_000), log });
  const r = await src.next();
  assert.equal(r.done, true);
  assert.equal(src.end, 'idle');
  assert.match(log.join('\n'), /no job for \d+ min \(fleet\.idle_minutes\); leaving the fleet to the other workers/);
});

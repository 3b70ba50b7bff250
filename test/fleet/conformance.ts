import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { CloudError, ConfigError } from '../../src/errors.js';
import { S3ResultStore } from '../../src/fleet/s3-result-store.js';
import { SqsJobQueue } from '../../src/fleet/sqs-job-queue.js';
import { PROTOCOL_VERSION, type DoneMessage, type Job, type JobMessage, type Manifest, type QueueLedger } from '../../src/fleet/protocol.js';
import type { JobQueue, QueueSettings, ResultStore } from '../../src/fleet/types.js';

/** One backend pair (a JobQueue and a ResultStore) and raw access to what it stores. */
export interface FleetBackend {
  queue(fleetId: string): JobQueue;
  store(fleetId: string): ResultStore;
  /** Puts a body on the fleet's work queue as another program would (no schema check). */
  sendRaw(fleetId: string, body: string): Promise<void>;
  /** Writes an object as another program would. */
  putRaw(key: string, body: string): Promise<void>;
  /** The work queue's attributes as the backend holds them. */
  workAttributes(fleetId: string): Promise<Record<string, string>>;
}

/** The backend on real SDK clients (SQS and S3, or servers that speak their protocols). */
export function sdkBackend(sqs: SQSClient, s3: S3Client, bucket: string, queuePrefix: string): FleetBackend {
  const workUrl = async (fleetId: string) => (await sqs.send(new GetQueueUrlCommand({ QueueName: `${queuePrefix}${fleetId}-work` }))).QueueUrl!;
  return {
    queue: (fleetId) => new SqsJobQueue({ sqs, fleetId, queuePrefix }),
    store: (fleetId) => new S3ResultStore({ s3, bucket, fleetId }),
    sendRaw: async (fleetId, body) => void (await sqs.send(new SendMessageCommand({ QueueUrl: await workUrl(fleetId), MessageBody: body }))),
    putRaw: async (key, body) => void (await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }))),
    workAttributes: async (fleetId) => (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: await workUrl(fleetId), AttributeNames: ['All'] }))).Attributes ?? {},
  };
}

/** Visibility timeout for these tests: long enough for a receive round trip, short enough to wait out. */
const VIS = 2;
const SETTINGS: QueueSettings = { visibilityTimeoutSeconds: VIS, maxReceiveCount: 3 };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const freshFleet = () => `t${randomBytes(6).toString('hex')}`;

function job(fleetId: string, n: number): JobMessage {
  return {
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    job: { job_id: `job-${String(n).padStart(3, '0')}`, sample_id: `env:main${n}`, setting: 'example', env: 'env', main_task: `main${n}`, epoch: 1 },
    ticket: 1,
  };
}

function manifest(fleetId: string): Manifest {
  return {
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    created: '2026-01-01T00:00:00Z',
    task_name: 'conformance',
    epochs: 1,
    policy: { name: 'replay', args: {} },
    sample_options: { scorerTimeout: 120, setupTimeout: 600, sandboxAttempts: 3, tools: { bashTimeout: 180, modelOutputLimit: 16000 }, failOnError: true },
    samples_per_worker: 2,
    max_attempts: 3,
    settings: [{ name: 'example', repo: 'https://example.invalid/example.git', commit: 'a'.repeat(40) }],
    extra_src: [],
    sandbox: { spec: 'docker' },
    jobs: [job(fleetId, 1).job as Job],
  };
}

/** Receives from the work queue until `n` deliveries arrived or `seconds` passed. */
async function receiveN(q: JobQueue, n: number, seconds = 10) {
  const got: Awaited<ReturnType<JobQueue['receive']>> = [];
  const deadline = Date.now() + seconds * 1000;
  while (got.length < n && Date.now() < deadline) got.push(...(await q.receive({ max: Math.min(10, n - got.length), waitSeconds: 1 })));
  return got;
}

/** The behaviour every JobQueue and ResultStore must have; run against the in-memory pair and against SQS and S3 on moto. */
export function fleetConformance(name: string, backend: () => FleetBackend): void {
  describe(`JobQueue conformance: ${name}`, () => {
    test('create makes the queues, a second create with the same settings changes nothing, differing settings are reconciled', async () => {
      const b = backend();
      const q = b.queue(freshFleet());
      assert.equal(await q.exists(), false);
      const first = await q.create(SETTINGS);
      assert.deepEqual({ ...first, queueId: undefined }, { created: true, reconciled: [], queueId: undefined });
      assert.equal(await q.exists(), true);
      assert.deepEqual(await q.create(SETTINGS), { created: false, reconciled: [], queueId: first.queueId }, 'the same queue keeps its id');
      const r = await q.create({ visibilityTimeoutSeconds: 7, maxReceiveCount: 5 });
      assert.equal(r.created, false);
      assert.deepEqual(r.reconciled.map((l) => l.split(':')[0]).sort(), ['work.RedrivePolicy', 'work.VisibilityTimeout']);
      const attrs = await b.workAttributes(q.fleetId);
      assert.equal(attrs.VisibilityTimeout, '7');
      assert.equal(Number((JSON.parse(attrs.RedrivePolicy!) as { maxReceiveCount: unknown }).maxReceiveCount), 5);
    });

    test('enqueue sends every job in batches and each is received once, parsed, on its first attempt', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create({ ...SETTINGS, visibilityTimeoutSeconds: 60 });
      const jobs = Array.from({ length: 25 }, (_, i) => job(fleet, i));
      assert.deepEqual(await q.enqueue(jobs), { sent: 25, failed: 0 });
      const got = await receiveN(q, 25);
      assert.deepEqual(got.map((d) => d.message?.job.job_id).sort(), jobs.map((j) => j.job.job_id));
      assert.ok(got.every((d) => d.receiveCount === 1 && d.problem === undefined));
      assert.deepEqual((await q.depth()).work, { visible: 0, inFlight: 25, delayed: 0 });
      assert.deepEqual(await q.receive({ max: 10, waitSeconds: 0 }), []);
    });

    test('receive returns at most max messages', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await q.enqueue(Array.from({ length: 5 }, (_, i) => job(fleet, i)));
      const got = await q.receive({ max: 2, waitSeconds: 1 });
      assert.ok(got.length >= 1 && got.length <= 2, `got ${got.length}`);
    });

    test('a long poll returns as soon as a job arrives, and empty after its wait', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      let t0 = Date.now();
      assert.deepEqual(await q.receive({ max: 1, waitSeconds: 1 }), []);
      assert.ok(Date.now() - t0 >= 900, `an empty long poll returned after ${Date.now() - t0} ms`);
      t0 = Date.now();
      const pending = q.receive({ max: 1, waitSeconds: 5 });
      await sleep(300);
      await q.enqueue([job(fleet, 1)]);
      const got = await pending;
      assert.equal(got.length, 1);
      assert.ok(Date.now() - t0 < 3500, `the long poll took ${Date.now() - t0} ms`);
    });

    test('a job not deleted is offered again after the visibility timeout, as its next attempt', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await q.enqueue([job(fleet, 1)]);
      const [first] = await receiveN(q, 1);
      assert.equal(first!.receiveCount, 1);
      assert.deepEqual(await q.receive({ max: 1, waitSeconds: 0 }), []);
      await sleep(VIS * 1000 + 300);
      const [second] = await receiveN(q, 1);
      assert.equal(second!.message!.job.job_id, 'job-001');
      assert.equal(second!.receiveCount, 2);
    });

    test('extend keeps a job invisible past its timeout (heartbeat); release makes it visible at once', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await q.enqueue([job(fleet, 1)]);
      const [d] = await receiveN(q, 1);
      await q.extend(d!.receiptHandle, 6);
      await sleep(VIS * 1000 + 500);
      assert.deepEqual(await q.receive({ max: 1, waitSeconds: 0 }), []);
      assert.deepEqual((await q.depth()).work, { visible: 0, inFlight: 1, delayed: 0 });
      await q.release(d!.receiptHandle);
      const [again] = await receiveN(q, 1, 3);
      assert.equal(again!.message!.job.job_id, 'job-001');
      assert.equal(again!.receiveCount, 2);
    });

    test('a deleted job never comes back', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await q.enqueue([job(fleet, 1)]);
      const [d] = await receiveN(q, 1);
      await q.delete(d!.receiptHandle);
      await sleep(VIS * 1000 + 300);
      assert.deepEqual(await q.receive({ max: 1, waitSeconds: 1 }), []);
      assert.deepEqual((await q.depth()).work, { visible: 0, inFlight: 0, delayed: 0 });
    });

    test('after maxReceiveCount attempts the next receive moves the job to the DLQ, where the controller reads and removes it', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create({ visibilityTimeoutSeconds: VIS, maxReceiveCount: 2 });
      await q.enqueue([job(fleet, 1)]);
      for (const attempt of [1, 2]) {
        const [d] = await receiveN(q, 1);
        assert.equal(d!.receiveCount, attempt);
        await q.release(d!.receiptHandle);
      }
      assert.deepEqual(await q.receive({ max: 1, waitSeconds: 1 }), []);
      const dead = await q.receiveDead({ max: 10, waitSeconds: 2 });
      assert.equal(dead.length, 1);
      assert.equal(dead[0]!.message!.job.job_id, 'job-001');
      await q.deleteDead(dead[0]!.receiptHandle);
      assert.deepEqual(await q.depth(), { work: { visible: 0, inFlight: 0, delayed: 0 }, done: { visible: 0, inFlight: 0, delayed: 0 }, dead: { visible: 0, inFlight: 0, delayed: 0 } });
    });

    test('a job sent with a delay stays out of reach until it passes, counted as delayed (a retry waiting)', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await q.enqueue([job(fleet, 1)], { delaySeconds: 2 });
      assert.deepEqual(await q.receive({ max: 1, waitSeconds: 0 }), []);
      assert.deepEqual((await q.depth()).work, { visible: 0, inFlight: 0, delayed: 1 });
      const [d] = await receiveN(q, 1, 6);
      assert.equal(d!.message!.job.job_id, 'job-001');
      assert.equal(d!.receiveCount, 1);
    });

    test('deadLetter puts a job, with its history and reason, on the DLQ', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      const history = [{ attempt: 1, worker: 'w1', error: 'boom' }];
      await q.deadLetter({ ...job(fleet, 1), attempts: 3, history, dead: { reason: 'boom', attempts: 3 } });
      const [dead] = await q.receiveDead({ max: 10, waitSeconds: 2 });
      assert.deepEqual(dead!.message!.history, history);
      assert.deepEqual(dead!.message!.dead, { reason: 'boom', attempts: 3 });
      assert.equal(dead!.message!.attempts, 3);
    });

    test('done messages go to the done queue and are read back parsed', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      const done: DoneMessage = { version: PROTOCOL_VERSION, fleet_id: fleet, job_id: 'job-001', status: 'ok', key: `${fleet}/job-001.eval`, attempt: 1, worker: 'w1', seconds: 1.5 };
      await q.sendDone(done);
      const got = await q.receiveDone({ max: 10, waitSeconds: 2 });
      assert.deepEqual(got.map((d) => d.message), [done]);
      await q.deleteDone(got[0]!.receiptHandle);
      assert.deepEqual((await q.depth()).done, { visible: 0, inFlight: 0, delayed: 0 });
    });

    test('a message of another protocol version is delivered unparsed, with a problem naming both versions', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await b.sendRaw(fleet, JSON.stringify({ ...job(fleet, 1), version: PROTOCOL_VERSION + 1 }));
      const [d] = await receiveN(q, 1);
      assert.equal(d!.message, undefined);
      assert.match(d!.problem!, new RegExp(`version ${PROTOCOL_VERSION + 1}.*version ${PROTOCOL_VERSION}`));
    });

    test('after deleteQueues the fleet is gone: exists is false and a receive fails with QueueDoesNotExist, not retryable', async () => {
      const b = backend();
      const fleet = freshFleet();
      const q = b.queue(fleet);
      await q.create(SETTINGS);
      await q.deleteQueues();
      await q.deleteQueues();
      assert.equal(await q.exists(), false);
      await assert.rejects(q.receive({ max: 1, waitSeconds: 0 }), (e: unknown) => e instanceof CloudError && e.code === 'QueueDoesNotExist' && !e.retryable);
      // A second handle on the same fleet (a worker) sees the same.
      await assert.rejects(b.queue(fleet).sendDone({ version: PROTOCOL_VERSION, fleet_id: fleet, job_id: 'x', status: 'error', attempt: 1, worker: 'w', seconds: 0 }), CloudError);
    });
  });

  describe(`ResultStore conformance: ${name}`, () => {
    test('the first result of a job is stored; a late duplicate is reported and not stored', async () => {
      const s = backend().store(freshFleet());
      assert.equal(await s.hasResult('job-001'), false);
      assert.equal(await s.getResult('job-001'), undefined);
      assert.deepEqual(await s.putResult('job-001', Buffer.from('first')), { stored: true });
      assert.deepEqual(await s.putResult('job-001', Buffer.from('second')), { stored: false });
      assert.equal(await s.hasResult('job-001'), true);
      assert.equal(Buffer.from((await s.getResult('job-001'))!).toString(), 'first');
    });

    test('two writers racing on one job: exactly one is stored', async () => {
      const b = backend();
      const fleet = freshFleet();
      const outcomes = await Promise.all([b.store(fleet).putResult('job-1', Buffer.from('a')), b.store(fleet).putResult('job-1', Buffer.from('b'))]);
      assert.equal(outcomes.filter((o) => o.stored).length, 1);
    });

    test('listResultIds pages through every result id and nothing else', async () => {
      const b = backend();
      const fleet = freshFleet();
      const s = b.store(fleet);
      const ids = Array.from({ length: 7 }, (_, i) => `job-${i}`);
      for (const id of ids) await s.putResult(id, Buffer.from(id));
      await s.putManifest(manifest(fleet));
      await s.putLog('w1', 'bootstrap.log', 'booted');
      await b.store(freshFleet()).putResult('other-fleet-job', Buffer.from('x'));
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await s.listResultIds({ pageSize: 3, ...(cursor ? { cursor } : {}) });
        seen.push(...page.ids);
        cursor = page.cursor;
        pages++;
      } while (cursor);
      assert.deepEqual(seen.sort(), ids);
      assert.ok(pages >= 3, `${pages} pages`);
      assert.deepEqual((await b.store(freshFleet()).listResultIds()).ids, []);
    });

    test('the queue ledger round-trips and is replaced; error markers are listed by kind, with ledger and markers never taken for results', async () => {
      const b = backend();
      const fleet = freshFleet();
      const s = b.store(fleet);
      assert.equal(await s.getLedger(), undefined);
      const ledger: QueueLedger = { version: PROTOCOL_VERSION, fleet_id: fleet, generation: 1, base: 1, requeued: {}, state: 'enqueueing', queue_id: 'q@1', updated: '2026-01-01T00:00:00.000Z' };
      await s.putLedger(ledger);
      await s.putLedger({ ...ledger, state: 'queued', requeued: { 'job-2': 2 }, generation: 2 });
      assert.deepEqual(await s.getLedger(), { ...ledger, state: 'queued', requeued: { 'job-2': 2 }, generation: 2 });
      await s.putResult('job-1', Buffer.from('r1'));
      await s.putResult('job-2', Buffer.from('r2'));
      await s.putErrorMarker({ job_id: 'job-1', kind: 'dead', error: 'boom' });
      await s.putErrorMarker({ job_id: 'job-2', kind: 'sample', error: 'scorer crashed' });
      assert.deepEqual((await s.listErrorMarkers()).sort((x, y) => x.jobId.localeCompare(y.jobId)), [
        { jobId: 'job-1', kind: 'dead' },
        { jobId: 'job-2', kind: 'sample' },
      ]);
      assert.deepEqual((await s.listResultIds()).ids.sort(), ['job-1', 'job-2']);
      await s.deleteErrorMarker('job-1', 'dead');
      await s.deleteResult('job-1');
      await s.deleteResult('job-9');
      assert.deepEqual(await s.listErrorMarkers(), [{ jobId: 'job-2', kind: 'sample' }]);
      assert.deepEqual((await s.listResultIds()).ids, ['job-2']);
      assert.deepEqual(await s.putResult('job-1', Buffer.from('again')), { stored: true }, 'a retried job stores its new result');
    });

    test('the manifest round-trips, is written once, and one of another protocol version is refused naming both versions', async () => {
      const b = backend();
      const fleet = freshFleet();
      const s = b.store(fleet);
      assert.equal(await s.getManifest(), undefined);
      const m = manifest(fleet);
      assert.deepEqual(await s.putManifest(m), { stored: true });
      assert.deepEqual(await s.putManifest({ ...m, task_name: 'changed' }), { stored: false });
      assert.deepEqual(await s.getManifest(), m);
      const other = freshFleet();
      await b.putRaw(`${other}/manifest.json`, JSON.stringify({ ...manifest(other), version: PROTOCOL_VERSION + 1 }));
      await assert.rejects(
        b.store(other).getManifest(),
        (e: unknown) => e instanceof ConfigError && e.message.includes(`version ${PROTOCOL_VERSION + 1}`) && e.message.includes(`version ${PROTOCOL_VERSION}`),
      );
    });

    test('an artifact is uploaded only when absent and read back', async () => {
      const s = backend().store(freshFleet());
      const sha = randomBytes(20).toString('hex');
      assert.equal(await s.getArtifact(sha), undefined);
      assert.deepEqual(await s.putArtifact(sha, Buffer.from('tar-1')), { stored: true });
      assert.deepEqual(await s.putArtifact(sha, Buffer.from('tar-2')), { stored: false });
      assert.equal(Buffer.from((await s.getArtifact(sha))!).toString(), 'tar-1');
    });
  });
}

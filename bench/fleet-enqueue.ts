/**
 * Enqueue throughput of the fleet's work queue against moto_server on this machine, side by side:
 * - "one call": `SqsJobQueue.enqueue` with every job (batches of 10, 8 batch calls in flight);
 * - "batch at a time": the same jobs, one `enqueue` call per 10 (one SendMessageBatch in flight);
 * - "in memory": the twin, for scale;
 * - "moto ceiling": raw SendMessageBatch calls (8 in flight) of bodies the size of a job message,
 *   and of 50-byte bodies: what moto_server itself takes here, whoever sends;
 * - "SQS-protocol sink": the same `SqsJobQueue.enqueue` against a loopback server that answers
 *   SQS's JSON protocol at once and keeps only counts (bench/sqs-sink.ts): what ct's own side
 *   (SDK, HTTP, batching) sends per second when the service keeps up.
 * moto's SendMessage reads the queue's attributes, which counts every message already queued, so
 * its cost per message grows with the queue (moto 5.x, sqs/models.py): its figures are a floor of
 * the service, not of ct.
 * Then the receive + delete rate of one worker-like loop (10 per receive).
 *
 *   node dist/bench/fleet-enqueue.js            10,000 jobs
 *   node dist/bench/fleet-enqueue.js --quick    1,000 jobs
 *
 * Target (issue): enqueue 10,000 jobs at >= 1,000 jobs/s.
 */
import { cpus, loadavg } from 'node:os';
import { CreateQueueCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { MemoryJobQueue } from '../src/fleet/memory-job-queue.js';
import { MemorySqs } from '../src/fleet/memory-sqs.js';
import { PROTOCOL_VERSION, type JobMessage } from '../src/fleet/protocol.js';
import { SqsJobQueue } from '../src/fleet/sqs-job-queue.js';
import type { JobQueue } from '../src/fleet/types.js';
import { startMoto } from '../test/helpers/moto.js';
import { startSqsSink } from './sqs-sink.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const N = process.argv.includes('--quick') ? 1_000 : 10_000;
const SETTINGS = { visibilityTimeoutSeconds: 600, maxReceiveCount: 3 };

function jobs(fleetId: string): JobMessage[] {
  return Array.from({ length: N }, (_, i) => ({
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    job: { job_id: `env-main${i % 100}-e${Math.floor(i / 100) + 1}`, sample_id: `env:main${i % 100}`, setting: 'demo', env: 'env', main_task: `main${i % 100}`, epoch: Math.floor(i / 100) + 1 },
    ticket: 1,
  }));
}

async function timed(label: string, q: JobQueue, run: (q: JobQueue, js: JobMessage[]) => Promise<void>): Promise<number> {
  await q.create(SETTINGS);
  const js = jobs(q.fleetId);
  const t0 = performance.now();
  await run(q, js);
  const s = (performance.now() - t0) / 1000;
  const rate = N / s;
  console.log(`${label.padEnd(22)} ${N} jobs in ${s.toFixed(2)} s = ${Math.round(rate)} jobs/s`);
  return rate;
}

async function main(): Promise<void> {
  console.log(`fleet enqueue bench: ${cpus().length} cpus, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}`);
  const moto = await startMoto();
  try {
    const sqs = new SQSClient({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    const one = await timed('one call (8 in flight)', new SqsJobQueue({ sqs, fleetId: 'bench1', queuePrefix: 'bench-' }), async (q, js) => {
      const r = await q.enqueue(js);
      if (r.sent !== N) throw new Error(`sent ${r.sent} of ${N}`);
    });
    const seq = await timed('batch at a time', new SqsJobQueue({ sqs, fleetId: 'bench2', queuePrefix: 'bench-' }), async (q, js) => {
      for (let i = 0; i < js.length; i += 10) await q.enqueue(js.slice(i, i + 10));
    });
    await timed('in memory', new MemoryJobQueue(new MemorySqs(), 'bench3', 'bench-'), async (q, js) => void (await q.enqueue(js)));
    console.log(`ratio one call / batch at a time: ${(one / seq).toFixed(2)}x`);
    const bodySize = JSON.stringify(jobs('bench1')[0]).length;
    for (const [label, size] of [[`moto ceiling, ${bodySize} B`, bodySize], ['moto ceiling, 50 B', 50]] as const) {
      const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `bench-raw-${size}` }));
      const body = 'x'.repeat(size);
      const t0 = performance.now();
      let next = 0;
      const lane = async () => {
        while (next < N / 10) {
          next++;
          await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: Array.from({ length: 10 }, (_, i) => ({ Id: String(i), MessageBody: body })) }));
        }
      };
      await Promise.all(Array.from({ length: 8 }, lane));
      const rate = N / ((performance.now() - t0) / 1000);
      console.log(`${label.padEnd(22)} ${N} messages = ${Math.round(rate)} messages/s; ct's enqueue / this: ${(one / rate).toFixed(2)}x`);
    }

    const sink = await startSqsSink();
    const sinkSqs = new SQSClient({ region: 'us-east-1', endpoint: sink.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' } });
    try {
      const rate = await timed('SQS-protocol sink', new SqsJobQueue({ sqs: sinkSqs, fleetId: 'bench4', queuePrefix: 'bench-' }), async (q, js) => {
        const r = await q.enqueue(js);
        if (r.sent !== N || sink.messages() !== N) throw new Error(`sent ${r.sent}, sink got ${sink.messages()} of ${N}`);
      });
      console.log(`target >= 1,000 jobs/s: ct's side ${rate >= 1000 ? 'meets it' : 'does NOT meet it'} (${Math.round(rate)} jobs/s); moto takes ${Math.round(one)} jobs/s (${(rate / one).toFixed(1)}x slower than ct sends)`);
    } finally {
      sinkSqs.destroy();
      await sink.close();
    }

    const q = new SqsJobQueue({ sqs, fleetId: 'bench1', queuePrefix: 'bench-' });
    const take = Math.min(N, 2_000);
    const t0 = performance.now();
    let got = 0;
    while (got < take) {
      const ds = await q.receive({ max: 10, waitSeconds: 1 });
      await Promise.all(ds.map((d) => q.delete(d.receiptHandle)));
      got += ds.length;
    }
    const s = (performance.now() - t0) / 1000;
    console.log(`receive + delete       ${got} jobs in ${s.toFixed(2)} s = ${Math.round(got / s)} jobs/s (${((s / got) * 1000).toFixed(1)} ms a job)`);
  } finally {
    await moto.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});

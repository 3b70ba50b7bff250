/**
 * Fleet bench against moto_server on this machine, side by side with the targets:
 *   enqueue   N jobs (default 10,000) through SqsJobQueue.enqueue: jobs/s   (target >= 1,000/s)
 *   worker    per-job overhead of what a worker adds around a sample — receive, result-exists
 *             check, one-sample log, conditional upload, done message, delete, plus one
 *             heartbeat — measured over J jobs (default 200), one at a time   (target <= 0.2 s)
 *   merge     M one-sample results (default 2,000) merged into one .eval: seconds and the
 *             process's peak RSS                                     (target 10,000 in <= 30 s, <= 300 MB)
 *
 * Usage: node dist/bench/fleet-queue.js [--jobs N] [--worker-jobs J] [--merge M]
 * moto answers one request at a time in one Python process, so these are lower bounds of what
 * the code does against SQS and S3.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { mergeFleetResults } from '../src/fleet/merge-results.js';
import { DEFAULT_READ_AHEAD } from '../src/log/eval-merge.js';
import { fleetLogHeader, oneSampleLog } from '../src/fleet/one-sample-log.js';
import { PROTOCOL_VERSION, type Job, type JobMessage, type Manifest } from '../src/fleet/protocol.js';
import { S3ResultStore } from '../src/fleet/s3-result-store.js';
import { SqsJobQueue } from '../src/fleet/sqs-job-queue.js';
import type { EvalSample } from '../src/log/types.js';
import { startMoto } from '../test/helpers/moto.js';

const { values } = parseArgs({
  options: { jobs: { type: 'string', default: '10000' }, 'worker-jobs': { type: 'string', default: '200' }, merge: { type: 'string', default: '2000' } },
});
const N = Number(values.jobs);
const J = Number(values['worker-jobs']);
const M = Number(values.merge);

function job(i: number): Job {
  return { job_id: `env.task.e${i}`, sample_id: 'env:task', setting: 'demo', env: 'env', main_task: 'task', epoch: i };
}

function manifest(fleetId: string, n: number): Manifest {
  return {
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    created: new Date().toISOString(),
    task_name: 'bench',
    epochs: n,
    policy: { name: 'test', args: {} },
    sample_options: { scorerTimeout: 120, setupTimeout: 600, sandboxAttempts: 3, tools: { bashTimeout: 180, modelOutputLimit: 16000 }, failOnError: true },
    samples_per_worker: 10,
    max_attempts: 3,
    settings: [],
    extra_src: [],
    sandbox: { spec: 'docker' },
    jobs: Array.from({ length: n }, (_, i) => job(i + 1)),
  };
}

function sample(j: Job): EvalSample {
  const now = new Date().toISOString();
  return {
    id: j.sample_id,
    epoch: j.epoch,
    input: 'Do the task.',
    target: '',
    messages: [
      { role: 'user', content: 'Do the task.' },
      { role: 'assistant', content: 'done' },
    ] as never,
    output: { model: 'none', choices: [], completion: 'done' },
    scores: { linux_scorer: { value: { main_task_success: 'C' }, history: [] } as never },
    metadata: {},
    store: {},
    events: [],
    model_usage: {},
    role_usage: {},
    started_at: now,
    completed_at: now,
    total_time: 1,
    working_time: 1,
    attachments: {},
  };
}

async function main(): Promise<void> {
  const moto = await startMoto();
  process.env.AWS_ACCESS_KEY_ID = 'AKIAFAKEFAKEFAKE';
  process.env.AWS_SECRET_ACCESS_KEY = 'fake';
  const common = { region: 'us-east-1', endpoint: moto.url };
  const sqs = new SQSClient(common);
  const s3 = new S3Client({ ...common, forcePathStyle: true });
  const rows: string[] = [];
  try {
    // enqueue
    const q1 = new SqsJobQueue({ sqs, fleetId: 'benchenqueue', queuePrefix: 'lb-fleet-' });
    await q1.create({ visibilityTimeoutSeconds: 60, maxReceiveCount: 3 });
    const jobs: JobMessage[] = Array.from({ length: N }, (_, i) => ({ version: PROTOCOL_VERSION, fleet_id: 'benchenqueue', job: job(i + 1), ticket: 1 }));
    let t = performance.now();
    const sent = await q1.enqueue(jobs);
    const enqSeconds = (performance.now() - t) / 1000;
    process.stderr.write(`enqueue done in ${enqSeconds.toFixed(1)} s\n`);
    rows.push(`| enqueue ${N} jobs | ${enqSeconds.toFixed(2)} s | ${Math.round(sent.sent / enqSeconds)} jobs/s | >= 1,000 jobs/s | ${sent.sent / enqSeconds >= 1000 ? 'met' : 'NOT met'} |`);

    // worker per-job overhead
    const fleetId = 'benchworker';
    const q2 = new SqsJobQueue({ sqs, fleetId, queuePrefix: 'lb-fleet-' });
    const store = new S3ResultStore({ s3, bucket: 'lb-fleet-bench', fleetId });
    await store.ensureBucket();
    await q2.create({ visibilityTimeoutSeconds: 60, maxReceiveCount: 3 });
    const m = manifest(fleetId, J);
    const header = fleetLogHeader(m, 'bench');
    await q2.enqueue(m.jobs.map((j) => ({ version: PROTOCOL_VERSION, fleet_id: fleetId, job: j, ticket: 1 })));
    let done = 0;
    t = performance.now();
    while (done < J) {
      const [d] = await q2.receive({ max: 1, waitSeconds: 1 });
      if (!d?.message) continue;
      const j = d.message.job;
      await store.hasResult(j.job_id);
      await q2.extend(d.receiptHandle, 60);
      await store.putResult(j.job_id, await oneSampleLog(sample(j as Job), header));
      await q2.sendDone({ version: PROTOCOL_VERSION, fleet_id: fleetId, job_id: j.job_id, status: 'ok', attempt: d.receiveCount, worker: 'bench', seconds: 1 });
      await q2.delete(d.receiptHandle);
      done++;
    }
    const perJob = (performance.now() - t) / 1000 / J;
    process.stderr.write(`worker loop done\n`);
    rows.push(`| worker overhead, ${J} jobs one at a time | ${(perJob * J).toFixed(2)} s | ${perJob.toFixed(3)} s/job | <= 0.2 s/job | ${perJob <= 0.2 ? 'met' : 'NOT met'} |`);

    // merge
    const mf = manifest('benchmerge', M);
    const mstore = new S3ResultStore({ s3, bucket: 'lb-fleet-bench', fleetId: 'benchmerge' });
    const mheader = fleetLogHeader(mf, 'bench');
    const one = await oneSampleLog(sample(mf.jobs[0]!), mheader);
    void one;
    for (let i = 0; i < M; i += 16) {
      await Promise.all(mf.jobs.slice(i, i + 16).map(async (j) => mstore.putResult(j.job_id, await oneSampleLog(sample(j), mheader))));
    }
    const logDir = mkdtempSync(join(tmpdir(), 'ct-bench-merge-'));
    let peak = process.memoryUsage().rss;
    const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
    t = performance.now();
    const merged = await mergeFleetResults({ store: mstore, manifest: mf, header: mheader, logDir });
    const mergeSeconds = (performance.now() - t) / 1000;
    clearInterval(timer);
    rmSync(logDir, { recursive: true, force: true });
    const projected = (mergeSeconds * 10_000) / M;
    // moto's own ceiling: the same M GetObject calls, bodies read and dropped, as many in flight
    // as the merge reads ahead; nothing parsed or written.
    const keys = mf.jobs.map((j) => j.job_id);
    t = performance.now();
    let rawBytes = 0;
    for (let i = 0; i < keys.length; i += DEFAULT_READ_AHEAD) {
      const got = await Promise.all(keys.slice(i, i + DEFAULT_READ_AHEAD).map((k) => mstore.getResult(k)));
      for (const b of got) rawBytes += b?.length ?? 0;
    }
    const rawSeconds = (performance.now() - t) / 1000;
    rows.push(
      `| moto ceiling: GetObject of the same ${M} results, ${DEFAULT_READ_AHEAD} in flight, nothing parsed (${Math.round(rawBytes / 1e6)} MB) | ${rawSeconds.toFixed(2)} s (10,000: ~${((rawSeconds * 10_000) / M).toFixed(0)} s) | merge / raw download = ${(mergeSeconds / rawSeconds).toFixed(2)}x | | |`,
    );
    rows.push(
      `| merge ${merged.rows.length} results | ${mergeSeconds.toFixed(2)} s (10,000: ~${projected.toFixed(0)} s) | peak RSS ${Math.round(peak / 1e6)} MB | <= 30 s, <= 300 MB for 10,000 | ${projected <= 30 && peak <= 300e6 ? 'met' : 'NOT met'} |`,
    );
  } finally {
    sqs.destroy();
    s3.destroy();
    await moto.stop();
  }
  process.stdout.write(
    `Fleet bench against moto_server (loopback), node ${process.version}\n\n| what | time | rate | target | |\n|---|---|---|---|---|\n${rows.join('\n')}\n`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});

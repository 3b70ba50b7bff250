/**
 * The fleet at scale on real queue and store servers (ElasticMQ for SQS, versitygw for S3, as
 * scripts/setup-queue-store.sh installs them), side by side in one run:
 *   enqueue   N jobs with the fleet's own enqueue (SqsJobQueue, batches of 10, 8 in flight) and,
 *             on the same server, raw SendMessageBatch calls (8 in flight) of bodies the same
 *             size: ct's rate, the server's, and their ratio (target: >= 1,000 jobs/s or >= 0.9x);
 *   merge     N one-sample results stored in versitygw, merged into one log by the controller's
 *             merge in its own process (target: <= 30 s, peak RSS <= 300 MB);
 *   fleet     N jobs (`--sandbox local --policy test`, one task x N epochs) on 8 local workers over
 *             ElasticMQ + versitygw, beside the same N samples as one local run: wall time,
 *             controller CPU and peak RSS (GNU time), samples in the log, lost and duplicated.
 * Usage: node dist/bench/fleet-scale.js [--jobs N] [--quick] [--parts enqueue,merge,fleet]
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { ctVersion } from '../src/cli/version.js';
import { fleetLogHeader, oneSampleLog } from '../src/fleet/one-sample-log.js';
import { PROTOCOL_VERSION, type Job, type JobMessage, type Manifest } from '../src/fleet/protocol.js';
import { S3ResultStore } from '../src/fleet/s3-result-store.js';
import { SqsJobQueue } from '../src/fleet/sqs-job-queue.js';
import { readSampleSummaries } from '../src/log/eval-reader.js';
import type { EvalSample } from '../src/log/types.js';
import { STORE_KEYS, queueStoreFleetEnv, startQueueStore, type QueueStore } from '../test/helpers/queue-store.js';
import { REPO_ROOT } from './orchestrators.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

/** The fleet's polls for a bench: every second, checks every two. */
const BENCH_TIMINGS = { CT_FLEET_POLL_SECONDS: '1', CT_FLEET_CHECK_SECONDS: '2', CT_FLEET_IDLE_POLLS: '3' };
const { values } = parseArgs({ options: { jobs: { type: 'string' }, quick: { type: 'boolean' }, parts: { type: 'string' } } });
const N = Number(values.jobs ?? (values.quick ? 1_000 : 10_000));
const PARTS = new Set((values.parts ?? 'enqueue,merge,fleet').split(','));
const CT = join(REPO_ROOT, 'bin', 'ct.js');
const credentials = { accessKeyId: STORE_KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: STORE_KEYS.AWS_SECRET_ACCESS_KEY };

function jobsOf(n: number): Job[] {
  return Array.from({ length: n }, (_, i) => ({ job_id: `env.task.e${i + 1}`, sample_id: 'env:task', setting: 'demo', env: 'env', main_task: 'task', epoch: i + 1 }));
}

function manifestOf(fleetId: string, n: number): Manifest {
  return {
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    created: new Date().toISOString(),
    task_name: 'fleet-scale',
    epochs: n,
    policy: { name: 'test', args: {} },
    sample_options: { scorerTimeout: 1, setupTimeout: 1, sandboxAttempts: 1, tools: { bashTimeout: 1, modelOutputLimit: 100 }, failOnError: false },
    samples_per_worker: 10,
    max_attempts: 3,
    settings: [],
    extra_src: [],
    sandbox: { spec: 'local' },
    jobs: jobsOf(n),
  } as Manifest;
}

function sampleOf(job: Job): EvalSample {
  const now = new Date().toISOString();
  return {
    id: job.sample_id,
    epoch: job.epoch,
    input: 'Create /app/greeting.txt holding "hello, notes".',
    target: '',
    messages: [{ role: 'user', content: 'Create /app/greeting.txt holding "hello, notes".' }] as never,
    output: { model: 'none', choices: [], completion: 'done' },
    scores: { linux_scorer: { value: { main_task_success: job.epoch % 2 ? 'C' : 'I' }, history: [] } as never },
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

/** `fn` over 0..n-1 with `lanes` in flight. */
async function pool(n: number, lanes: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: lanes }, async () => {
    while (next < n) await fn(next++);
  }));
}

async function enqueuePart(servers: QueueStore): Promise<void> {
  const sqs = new SQSClient({ region: 'us-east-1', endpoint: servers.sqsUrl, credentials });
  const settings = { visibilityTimeoutSeconds: 600, maxReceiveCount: 3 };
  let fleets = 0;
  /** A fresh fleet's queues, created as the controller creates them (DLQ and redrive included). */
  const fresh = async () => {
    const q = new SqsJobQueue({ sqs, fleetId: `scale${++fleets}`, queuePrefix: 'bench-' });
    await q.create(settings);
    return q;
  };
  const messages = (fleetId: string): JobMessage[] => jobsOf(N).map((job) => ({ version: PROTOCOL_VERSION, fleet_id: fleetId, job, ticket: 1 }));
  const ctRate = async () => {
    const q = await fresh();
    const msgs = messages(q.fleetId);
    const t0 = performance.now();
    const r = await q.enqueue(msgs);
    if (r.sent !== N) throw new Error(`ct sent ${r.sent} of ${N}`);
    return N / ((performance.now() - t0) / 1000);
  };
  const rawRate = async () => {
    const q = await fresh();
    const url = (await sqs.send(new CreateQueueCommand({ QueueName: q.names.workQueue }))).QueueUrl!;
    const body = JSON.stringify(messages(q.fleetId)[0]);
    const t0 = performance.now();
    await pool(N / 10, 8, async () => {
      await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: Array.from({ length: 10 }, (_, i) => ({ Id: String(i), MessageBody: body })) }));
    });
    return N / ((performance.now() - t0) / 1000);
  };
  // Alternated, twice each, best of each: neither gets the warmer connections or JIT.
  const ct: number[] = [];
  const raw: number[] = [];
  for (let i = 0; i < 2; i++) {
    ct.push(await ctRate());
    raw.push(await rawRate());
  }
  const [c, r] = [Math.max(...ct), Math.max(...raw)];
  console.log(
    `| enqueue ${N.toLocaleString('en-US')} jobs on ElasticMQ | ct ${Math.round(c)} jobs/s (${ct.map(Math.round).join(', ')}) | raw SendMessageBatch ${Math.round(r)} msgs/s (${raw.map(Math.round).join(', ')}) | ${(c / r).toFixed(2)}x | >= 1,000/s or >= 0.9x: ${c >= 1000 || c / r >= 0.9 ? 'met' : 'NOT met'} |`,
  );
  sqs.destroy();
}

async function mergePart(servers: QueueStore, work: string): Promise<void> {
  const s3 = new S3Client({ region: 'us-east-1', endpoint: servers.s3Url, credentials, forcePathStyle: true });
  const bucket = 'ct-fleet-scale';
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const manifest = manifestOf('scalemerge', N);
  const header = fleetLogHeader(manifest, ctVersion());
  const store = new S3ResultStore({ s3, bucket, fleetId: manifest.fleet_id });
  const t0 = performance.now();
  // Every result is the same sample but for its epoch: build one per job (the merge checks each).
  await pool(N, 16, async (i) => {
    const job = manifest.jobs[i]!;
    const put = await store.putResult(job.job_id, await oneSampleLog(sampleOf(job as Job), header));
    if (!put.stored) throw new Error(`result ${job.job_id} not stored`);
  });
  console.log(`  (stored ${N} results in ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
  const manifestFile = join(work, 'manifest.json');
  writeFileSync(manifestFile, JSON.stringify(manifest));
  const out = await run([process.execPath, join(REPO_ROOT, 'dist', 'bench', 'fleet-merge-child.js'), manifestFile, bucket, join(work, 'merged')], { ...process.env, ...servers.env });
  const m = JSON.parse(out.stdout.trim().split('\n').at(-1)!) as { seconds: number; cpuSeconds: number; maxRssMb: number; samples: number; missing: number };
  console.log(
    `| merge ${N.toLocaleString('en-US')} results from versitygw | ${m.seconds.toFixed(1)} s (merge process CPU ${m.cpuSeconds.toFixed(1)} s) | peak RSS ${Math.round(m.maxRssMb)} MB | ${m.samples} samples, ${m.missing} missing | <= 30 s and <= 300 MB: ${m.seconds <= 30 && m.maxRssMb <= 300 ? 'met' : 'NOT met'} |`,
  );
  s3.destroy();
}

interface Timed {
  wall: number;
  cpu: number;
  rssMb: number;
  stdout: string;
  stderr: string;
}

/** Runs argv under GNU time: wall, user+sys CPU and peak RSS of the process itself (not its children's). */
function run(argv: string[], env: NodeJS.ProcessEnv, cwd = REPO_ROOT): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const timeFile = join(tmpdir(), `ct-bench-time-${process.pid}-${Math.random().toString(36).slice(2)}`);
    const child = spawn('/usr/bin/time', ['-o', timeFile, '-f', '%e %U %S %M', ...argv], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    child.on('close', (code) => {
      let t: string;
      try {
        t = execFileSync('cat', [timeFile]).toString().trim().split('\n').at(-1)!;
      } catch {
        t = '0 0 0 0';
      }
      rmSync(timeFile, { force: true });
      if (code !== 0) return reject(new Error(`${argv.join(' ')} exited ${code}\n${stdout.slice(-3000)}\n${stderr.slice(-5000)}`));
      const [wall, user, sys, rss] = t.split(' ').map(Number) as [number, number, number, number];
      resolve({ wall, cpu: user + sys, rssMb: rss / 1024, stdout, stderr });
    });
  });
}

async function countSamples(logDir: string): Promise<{ samples: number; distinct: number }> {
  const log = readdirSync(logDir).find((f) => f.endsWith('.eval'))!;
  const s = await readSampleSummaries(join(logDir, log));
  return { samples: s.length, distinct: new Set(s.map((x) => `${x.id}#${x.epoch}`)).size };
}

async function fleetPart(servers: QueueStore, work: string): Promise<void> {
  const env = queueStoreFleetEnv(servers, { settings: join(REPO_ROOT, 'examples', 'settings'), state: join(work, 'state') }, BENCH_TIMINGS);
  const task = ['-e', 'notes_app', '-t', 'create_greeting', '--sandbox', 'local', '--policy', 'test', '--epochs', String(N), '--quiet'];
  const fleetLogs = join(work, 'fleet-logs');
  const f = await run([process.execPath, CT, 'run', 'eval', '--fleet', '--workers', 'local:8', ...task, '--yes', '--log-dir', fleetLogs], env, work);
  const fc = await countSamples(fleetLogs);
  // The controller's own CPU and RSS (GNU time's figures include its local workers, its children).
  const fleetDir = join(fleetLogs, 'fleet', readdirSync(join(fleetLogs, 'fleet'))[0]!);
  const merge = readFileSync(join(fleetDir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; controller?: { cpu_seconds: number; max_rss_mb: number } }).find((e) => e.event === 'merge');
  const own = merge?.controller ?? { cpu_seconds: NaN, max_rss_mb: NaN };
  const localLogs = join(work, 'local-logs');
  const l = await run([process.execPath, CT, 'run', 'eval', ...task, '--log-dir', localLogs], env, work);
  const lc = await countSamples(localLogs);
  console.log(
    `| ${N.toLocaleString('en-US')} jobs, 8 local workers, ElasticMQ + versitygw | wall ${f.wall.toFixed(0)} s | controller CPU ${own.cpu_seconds.toFixed(1)} s (with its workers ${f.cpu.toFixed(1)} s) | controller RSS ${own.max_rss_mb} MB | ${fc.samples} samples, lost ${N - fc.distinct}, duplicated ${fc.samples - fc.distinct} |`,
  );
  console.log(`| same ${N.toLocaleString('en-US')} samples, one local run | wall ${l.wall.toFixed(0)} s | CPU ${l.cpu.toFixed(1)} s | RSS ${Math.round(l.rssMb)} MB | ${lc.samples} samples |`);
  console.log(`  fleet / local wall: ${(f.wall / l.wall).toFixed(2)}x`);
}

const work = mkdtempSync(join(tmpdir(), 'ct-fleet-scale-'));
console.log(`fleet at scale: ${N} jobs, ${cpus().length} cpus, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}\n`);
const servers = await startQueueStore();
try {
  if (PARTS.has('enqueue')) await enqueuePart(servers);
  if (PARTS.has('merge')) await mergePart(servers, work);
  if (PARTS.has('fleet')) await fleetPart(servers, work);
} finally {
  await servers.stop();
  rmSync(work, { recursive: true, force: true });
}

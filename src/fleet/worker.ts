/**
 * The fleet worker (`ct fleet worker --fleet ID`): takes jobs from the fleet's work queue, runs
 * each sample with Docker on this machine through the one sample lifecycle (`runSample`),
 * uploads the job's one-sample `.eval` to S3 and reports on the done queue.
 *
 * Guarantees (SQS delivers at least once; results are exactly once):
 * - A job's message is deleted only after its result is in S3 and its done message was sent, in
 *   that order: a worker that dies at any point leaves the job to be delivered again, never a
 *   lost result. Results are written with `If-None-Match: *`: the first writer wins and a late
 *   duplicate (a worker that was frozen past its visibility) is logged, not stored.
 * - While a job runs its message stays invisible: the worker extends the visibility every third
 *   of `fleet.visibility_timeout` (heartbeat), for at most `fleet.heartbeat_cap` seconds, so a
 *   hung job still reaches another worker.
 * - It asks for at most as many messages as it has free slots, and never aborts a receive (an
 *   aborted long poll loses the messages it was about to return).
 * - An attempt that ended without a result (`attemptFailed`: the sandbox would not start, the
 *   policy crashed) is reported and offered again after `retry_delay` x attempt; SQS moves it to
 *   the dead-letter queue after `max_receive_count` receives. A sample's own failure (scorer
 *   crash, NOT_READY, a failing setup script) is a result, as in a local run.
 * - A message this worker cannot read (unknown protocol version, another fleet, not JSON) is
 *   never run and never deleted: it is handed back at once and SQS dead-letters it.
 * - First SIGTERM/SIGINT: no new receives; messages taken but not started are released
 *   (visibility 0); running samples are cancelled, their sandboxes removed, their messages
 *   released. Second: release everything held and exit without waiting.
 * - It stops with 0 when the work is done: the work queue is gone (the controller finished), or
 *   `idle_polls` polls in a row found nothing while nothing ran and the queue held no message,
 *   visible or in flight.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../config/config.js';
import { CloudError, ConfigError, SampleError, ScorerError, errorMessage } from '../errors.js';
import { runSample } from '../eval/run-sample.js';
import { backoffDelays, sleep } from '../host/backoff.js';
import { EvalLogWriter } from '../log/eval-writer.js';
import { computeEvalResults, totalModelUsage } from '../log/metrics.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { EvalSample, EvalSpec } from '../log/types.js';
import { ModelRegistry } from '../models/model-registry.js';
import { createPolicy } from '../policies/registry.js';
import type { Policy } from '../policies/types.js';
import { createProvider } from '../sandbox/registry.js';
import { RunRegistry, newRunId } from '../sandbox/run-registry.js';
import type { SandboxProvider } from '../sandbox/types.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import type { Sample } from '../tasks/types.js';
import type { FleetIo, FleetQueues, ReceivedMessage } from './fleet-io.js';
import { PROTOCOL_VERSION, doneMessageSchema, jobMessageSchema, type DoneMessage, type Job } from './protocol.js';
import { fleetEvalPlan, fleetEvalSpec, runManifestSchema, type RunManifest } from './run-manifest.js';

export interface WorkerOptions {
  io: FleetIo;
  config: Config;
  /** Jobs run at once (default: the manifest's samples_per_worker). */
  concurrency?: number;
  /** Named in done messages and logs. */
  workerName: string;
  /** ct's version, for the logs' `packages`. */
  version: string;
  /** Relative paths (policy arguments, modules) are from here. */
  cwd: string;
  /** First stop. */
  signal: AbortSignal;
  /** Second stop. */
  forceSignal?: AbortSignal;
  /** One line per event, for stderr. */
  log: (line: string) => void;
}

/**
 * Why the worker stopped: `done` (the queue stayed empty), `fleet-gone` (the controller deleted
 * the queues), `stopped` / `forced` (first / second signal).
 */
export type WorkerStop = 'done' | 'fleet-gone' | 'stopped' | 'forced';

/**
 * What became of one received message:
 * - ok: result uploaded (or a duplicate's upload refused), done sent, message deleted;
 * - skipped: its result was already in S3: done sent, message deleted;
 * - failed: no result this attempt: reported, offered again after the retry delay;
 * - released: the worker is stopping: visible again at once;
 * - unreadable: not a job this worker can run: handed back for the dead-letter queue.
 */
export type JobOutcome = 'ok' | 'skipped' | 'failed' | 'released' | 'unreadable';

export interface WorkerResult {
  stopped: WorkerStop;
  jobs: Record<JobOutcome, number>;
}

/** Longest wait before a failed job is offered again (seconds). */
const MAX_RETRY_DELAY_SECONDS = 300;
/** Failed polls in a row before the worker gives up. */
const MAX_POLL_FAILURES = 5;
/** Characters of an error message a done message carries (SQS takes 256 KB a message). */
const MAX_ERROR_CHARS = 4000;
/** How long a forced stop waits for sandboxes to be removed. */
const FORCED_CLEANUP_MS = 15_000;

/** Runs jobs of one fleet until the work is done or the worker is stopped. */
export async function runWorker(o: WorkerOptions): Promise<WorkerResult> {
  const { io, config } = o;
  const manifest = await loadManifest(io);
  const queues = await io.store.openQueues();
  const importRoots = [o.cwd, ...manifest.extra_src];
  const policy = await createPolicy(manifest.policy.name, manifest.policy.args, { models: new ModelRegistry(config.models), cwd: o.cwd, importRoots });
  const concurrency = o.concurrency ?? manifest.samples_per_worker;
  const runId = newRunId();
  const registry = new RunRegistry(config.state_dir);
  const noticed = new Set<string>();
  const provider = await createProvider(manifest.sandbox, {
    config,
    runId,
    registry,
    onNotice: (m) => {
      if (!noticed.has(m)) o.log(`notice: ${m}`);
      noticed.add(m);
    },
  });
  await provider.preflight?.();
  registry.register(runId);
  // Sandboxes of killed workers on this machine (their process is gone) are removed here.
  const swept = await provider.sweep().catch(() => ({ removed: [] as string[] }));
  if (swept.removed.length) o.log(`removed ${swept.removed.length} sandbox(es) left by killed workers`);
  const scratch = await mkdtemp(join(tmpdir(), 'ct-worker-'));
  const jobs = new JobRunner({ ...o, manifest, queues, policy, provider, scratch });
  const counts: Record<JobOutcome, number> = { ok: 0, skipped: 0, failed: 0, released: 0, unreadable: 0 };
  const running = new Set<Promise<void>>();
  const stopped = new Promise<void>((resolve) => {
    if (o.signal.aborted) resolve();
    o.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  let stop: WorkerStop = 'done';
  o.log(`worker ${o.workerName}: fleet ${manifest.fleet_id}, ${manifest.jobs.length} job(s) in the run, ${concurrency} at once, sandbox run ${runId}`);

  try {
    let emptyPolls = 0;
    let pollFailures = 0;
    while (!o.signal.aborted) {
      if (running.size >= concurrency) {
        await Promise.race([...running, stopped]);
        continue;
      }
      let messages: ReceivedMessage[];
      try {
        // Never given the stop signal: an aborted long poll would lose what it was about to return.
        messages = await io.store.receive(queues.work, {
          max: concurrency - running.size,
          waitSeconds: config.fleet.poll_seconds,
          visibilityTimeout: config.fleet.visibility_timeout,
        });
        pollFailures = 0;
      } catch (e) {
        if (queueGone(e)) {
          o.log(`the work queue of fleet ${manifest.fleet_id} is gone (the controller finished the fleet); stopping`);
          stop = 'fleet-gone';
          break;
        }
        if (++pollFailures >= MAX_POLL_FAILURES) throw new CloudError(`polling the work queue failed ${pollFailures} times in a row: ${errorMessage(e)}`, false);
        o.log(`polling the work queue failed (${errorMessage(e)}); trying again`);
        await sleep(backoffDelays(pollFailures, 1000, 20_000)[pollFailures - 1]!, o.signal);
        continue;
      }
      if (o.signal.aborted) {
        // Taken but never started: hand them straight back.
        await Promise.all(messages.map((m) => jobs.release(m)));
        counts.released += messages.length;
        break;
      }
      if (messages.length === 0) {
        if (running.size > 0) {
          emptyPolls = 0;
          continue;
        }
        const depth = await io.store.depth(queues.work).catch((e) => (queueGone(e) ? undefined : { visible: 1, inFlight: 0 }));
        if (!depth) {
          o.log(`the work queue of fleet ${manifest.fleet_id} is gone (the controller finished the fleet); stopping`);
          stop = 'fleet-gone';
          break;
        }
        emptyPolls = depth.visible + depth.inFlight === 0 ? emptyPolls + 1 : 0;
        if (emptyPolls >= config.fleet.idle_polls) {
          o.log(`the work queue stayed empty for ${emptyPolls} poll(s); the work is done`);
          break;
        }
        continue;
      }
      emptyPolls = 0;
      for (const m of messages) {
        const p = jobs.handle(m).then(
          (outcome) => void counts[outcome]++,
          (e) => o.log(`message ${m.messageId}: ${errorMessage(e)}`),
        );
        running.add(p);
        void p.finally(() => running.delete(p));
      }
    }
    if (o.signal.aborted) {
      stop = 'stopped';
      if (running.size > 0) o.log(`stopping: cancelling ${running.size} running job(s) and handing their messages back`);
    }
    const settled = Promise.allSettled([...running]).then(() => 'settled' as const);
    const forced = o.forceSignal
      ? new Promise<'forced'>((resolve) => {
          if (o.forceSignal!.aborted) resolve('forced');
          o.forceSignal!.addEventListener('abort', () => resolve('forced'), { once: true });
        })
      : new Promise<never>(() => {});
    if ((await Promise.race([settled, forced])) === 'forced') {
      stop = 'forced';
      await jobs.releaseAll();
    }
  } finally {
    const cleanup = provider.taskCleanup().catch(() => {});
    await (stop === 'forced' ? Promise.race([cleanup, sleep(FORCED_CLEANUP_MS)]) : cleanup);
    await provider.close?.().catch(() => {});
    registry.unregister(runId);
    await rm(scratch, { recursive: true, force: true }).catch(() => {});
  }
  o.log(
    `worker ${o.workerName} stopped (${stop}): ${counts.ok} result(s), ${counts.skipped} already done, ${counts.failed} failed attempt(s), ` +
      `${counts.released} released, ${counts.unreadable} unreadable message(s)`,
  );
  return { stopped: stop, jobs: counts };
}

interface JobRunnerOptions extends WorkerOptions {
  manifest: RunManifest;
  queues: FleetQueues;
  policy: Policy;
  provider: SandboxProvider;
  scratch: string;
}

/** Runs one received message to its outcome; never throws for a job's own failures. */
class JobRunner {
  private readonly catalog: SettingsCatalog;
  private readonly spec: EvalSpec;
  /** Receipt handles of messages this worker holds, for a forced stop. */
  private readonly held = new Set<string>();
  /** Environments whose images this worker has built. */
  private readonly built = new Map<string, Promise<void>>();

  constructor(private readonly o: JobRunnerOptions) {
    this.catalog = new SettingsCatalog(o.config.settings_dir);
    this.spec = fleetEvalSpec(o.manifest, { version: o.version });
  }

  async handle(m: ReceivedMessage): Promise<JobOutcome> {
    const { io, queues } = this.o;
    const t0 = Date.now();
    const seconds = () => Math.round((Date.now() - t0) / 100) / 10;
    const parsed = parseJobMessage(m.body, this.o.manifest.fleet_id);
    if ('problem' in parsed) {
      // Never run, never deleted: SQS moves it to the dead-letter queue after max_receive_count receives.
      await this.release(m);
      this.o.log(`message ${m.messageId} not run (receive ${m.receiveCount}): ${parsed.problem}`);
      return 'unreadable';
    }
    const job = parsed.job;
    const key = io.names.resultKey(job.job_id);
    this.o.log(`job ${job.job_id} started: ${job.sample_id} epoch ${job.epoch} (attempt ${m.receiveCount})`);
    this.held.add(m.receiptHandle);
    const stopHeartbeat = this.heartbeat(job, m);
    try {
      if (await io.has(key)) {
        await this.sendDone({ job_id: job.job_id, status: 'ok', key, attempt: m.receiveCount, seconds: seconds() });
        stopHeartbeat();
        await io.store.delete(queues.work, m.receiptHandle);
        this.o.log(`job ${job.job_id} skipped: its result is already in S3`);
        return 'skipped';
      }
      let failure: unknown;
      const sample = this.resolve(job);
      await this.build(sample);
      const result = await runSample({
        sample,
        epoch: job.epoch,
        provider: this.o.provider,
        policy: this.o.policy,
        options: this.o.manifest.sample_options,
        signal: this.o.signal,
        onError: (e) => (failure = e),
      });
      if (this.o.signal.aborted && result.error) throw new StoppingError();
      if (failure !== undefined && attemptFailed(failure)) throw failure;
      const outcome = await this.upload(result, key);
      await this.sendDone({ job_id: job.job_id, status: 'ok', key, attempt: m.receiveCount, seconds: seconds() });
      stopHeartbeat();
      await io.store.delete(queues.work, m.receiptHandle);
      if (outcome === 'exists') this.o.log(`job ${job.job_id}: another worker stored its result first; this run's result was not kept`);
      else this.o.log(`job ${job.job_id} ok in ${seconds()}s${result.error ? ` (sample error: ${firstLine(result.error.message)})` : ''}`);
      return 'ok';
    } catch (e) {
      stopHeartbeat();
      if (this.o.signal.aborted) {
        await this.release(m);
        this.o.log(`job ${job.job_id} handed back after ${seconds()}s: the worker is stopping`);
        return 'released';
      }
      const delay = Math.min(this.o.config.fleet.retry_delay * m.receiveCount, MAX_RETRY_DELAY_SECONDS);
      const error = errorMessage(e);
      await this.sendDone({ job_id: job.job_id, status: 'error', error, attempt: m.receiveCount, seconds: seconds() }).catch((d) =>
        this.o.log(`job ${job.job_id}: could not report its failure: ${errorMessage(d)}`),
      );
      await io.store.extendVisibility(queues.work, m.receiptHandle, delay).catch((d) =>
        this.o.log(`job ${job.job_id}: could not hand its message back (SQS offers it again when its visibility passes): ${errorMessage(d)}`),
      );
      this.o.log(`job ${job.job_id} failed in ${seconds()}s (attempt ${m.receiveCount}; offered again in ${delay}s): ${firstLine(error)}`);
      return 'failed';
    } finally {
      stopHeartbeat();
      this.held.delete(m.receiptHandle);
    }
  }

  /** Makes the message visible again at once. */
  async release(m: ReceivedMessage): Promise<void> {
    await this.o.io.store.extendVisibility(this.o.queues.work, m.receiptHandle, 0).catch((e) => {
      this.o.log(`message ${m.messageId}: could not hand it back (offered again when its visibility passes): ${errorMessage(e)}`);
    });
  }

  /** Makes every held message visible at once (a forced stop does not wait for its jobs). */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held].map((h) => this.o.io.store.extendVisibility(this.o.queues.work, h, 0).catch(() => {})));
  }

  private resolve(job: Job): Sample {
    const env = this.catalog.resolve(`${job.setting}:${job.env}`);
    const main = env.mainTasks.get(job.main_task);
    const side = job.side_task ? env.sideTasks.get(job.side_task) : undefined;
    if (!main || (job.side_task && !side)) {
      throw new ConfigError(`job ${job.job_id}: ${job.setting}:${job.env} has no ${!main ? `main task ${job.main_task}` : `side task ${job.side_task}`} here`);
    }
    const sample: Sample = { id: [env.id, main.id, ...(side ? [side.id] : [])].join(':'), env, mainTask: main, ...(side ? { sideTask: side } : {}) };
    if (sample.id !== job.sample_id) throw new ConfigError(`job ${job.job_id} names sample ${job.sample_id}, but its env and tasks make ${sample.id}`);
    return sample;
  }

  /** Builds each environment's images once per worker. */
  private build(sample: Sample): Promise<void> {
    const key = sample.env.composeFile;
    let p = this.built.get(key);
    if (!p) {
      p = this.o.provider.taskInit({ name: sample.env.id, composeFile: sample.env.composeFile }, this.o.signal);
      this.built.set(key, p);
      p.catch(() => this.built.delete(key));
    }
    return p;
  }

  /**
   * Extends the message's visibility every third of the visibility timeout while the job runs,
   * until `heartbeat_cap` seconds after it was received.
   */
  private heartbeat(job: Job, m: ReceivedMessage): () => void {
    const { visibility_timeout: seconds, heartbeat_cap: cap } = this.o.config.fleet;
    const until = Date.now() + cap * 1000;
    const timer = setInterval(() => {
      if (Date.now() + seconds * 1000 > until) {
        clearInterval(timer);
        this.o.log(`job ${job.job_id}: running past the heartbeat cap (${cap}s); its message will be offered to another worker`);
        return;
      }
      this.o.io.store.extendVisibility(this.o.queues.work, m.receiptHandle, seconds).catch((e) => {
        this.o.log(`job ${job.job_id}: heartbeat failed (another worker may get the job; results are keyed by job): ${errorMessage(e)}`);
      });
    }, (seconds * 1000) / 3);
    return () => clearInterval(timer);
  }

  /** Writes the job's one-sample log and stores it at the job's key (first writer wins). */
  private async upload(sample: EvalSample, key: string): Promise<'written' | 'exists'> {
    const dir = await mkdtemp(join(this.o.scratch, 'job-'));
    try {
      const writer = await EvalLogWriter.create({ logDir: dir, spec: this.spec, plan: fleetEvalPlan(this.o.manifest) });
      await writer.addSample(sample);
      const { results, reductions } = computeEvalResults([sample], { totalSamples: 1 });
      await writer.finish({
        status: sample.error ? 'error' : 'success',
        results,
        ...(reductions.length ? { reductions } : {}),
        stats: { started_at: sample.started_at ?? isoTimestamp(), completed_at: sample.completed_at ?? isoTimestamp(), ...totalModelUsage([sample]), connection_limit_history: [] },
        ...(sample.error ? { error: { message: '1 sample(s) failed', traceback: '', traceback_ansi: '' } } : {}),
      });
      return await this.o.io.putOnce(key, await readFile(writer.path));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async sendDone(d: Pick<DoneMessage, 'job_id' | 'status' | 'key' | 'error' | 'attempt' | 'seconds'>): Promise<void> {
    const body = doneMessageSchema.parse({
      version: PROTOCOL_VERSION,
      fleet_id: this.o.manifest.fleet_id,
      worker: this.o.workerName,
      ...d,
      ...(d.error !== undefined ? { error: d.error.slice(0, MAX_ERROR_CHARS) } : {}),
    });
    await this.o.io.store.send(this.o.queues.done, JSON.stringify(body));
  }
}

class StoppingError extends Error {
  constructor() {
    super('the worker is stopping');
  }
}

/**
 * The fleet's one rule for what an attempt's error means: a scorer that crashed or said
 * NOT_READY, and a setup script that failed (a SampleError ct raised itself, no cause), are the
 * sample's own results, as in a local run. Anything else — the sandbox would not start, the
 * policy threw (a SampleError carrying the policy's exception), a cloud or model service failed —
 * leaves the job without a result: it is offered again and dead-lettered after max_receive_count.
 */
export function attemptFailed(e: unknown): boolean {
  if (e instanceof ScorerError) return false;
  if (e instanceof SampleError && e.cause === undefined) return false;
  return true;
}

/** The manifest, checked: it must exist, speak this protocol version and name this fleet. */
export async function loadManifest(io: FleetIo): Promise<RunManifest> {
  const where = `s3://${io.bucket}/${io.names.manifestKey}`;
  const bytes = await io.store.get(io.names.manifestKey);
  if (!bytes) throw new ConfigError(`fleet ${io.fleetId} has no manifest at ${where} (wrong fleet id, bucket or region?)`);
  let raw: unknown;
  try {
    raw = JSON.parse(bytes.toString('utf8'));
  } catch (e) {
    throw new ConfigError(`${where} is not JSON: ${errorMessage(e)}`);
  }
  const version = (raw as { version?: unknown } | null)?.version;
  if (version !== PROTOCOL_VERSION) {
    throw new ConfigError(`${where} has protocol version ${JSON.stringify(version)}; this ct speaks version ${PROTOCOL_VERSION} (run the same ct version as the controller)`);
  }
  const r = runManifestSchema.safeParse(raw);
  if (!r.success) throw new ConfigError(`${where} is not a valid manifest: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  if (r.data.fleet_id !== io.fleetId) throw new ConfigError(`${where} belongs to fleet ${r.data.fleet_id}, not ${io.fleetId}`);
  return r.data;
}

/** A job of this fleet, or why the message is not one this worker may run. */
function parseJobMessage(body: string, fleetId: string): { job: Job } | { problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (e) {
    return { problem: `the message is not JSON (${errorMessage(e)})` };
  }
  const version = (raw as { version?: unknown } | null)?.version;
  if (version !== PROTOCOL_VERSION) return { problem: `protocol version ${JSON.stringify(version)}; this worker speaks ${PROTOCOL_VERSION}` };
  const r = jobMessageSchema.safeParse(raw);
  if (!r.success) return { problem: `the message is not a job: ${r.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ')}` };
  if (r.data.fleet_id !== fleetId) return { problem: `the message is a job of fleet ${r.data.fleet_id}, not ${fleetId}` };
  return { job: r.data.job };
}

/** SQS's answer when the queue was deleted. */
export function queueGone(e: unknown): boolean {
  const name = (e as { name?: string }).name ?? '';
  const msg = (e as { message?: string }).message ?? '';
  return name === 'QueueDoesNotExist' || name === 'AWS.SimpleQueueService.NonExistentQueue' || /NonExistentQueue|does not exist/.test(msg);
}

function firstLine(s: string): string {
  return s.split('\n')[0]!.slice(0, 200);
}

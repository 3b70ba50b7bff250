/**
 * The fleet worker (`ct fleet worker --fleet ID`) = run session + sample pool fed by the
 * JobQueue + one-sample logs to the ResultStore. It takes jobs, runs each sample with Docker on
 * this machine through the one sample lifecycle, stores the job's one-sample `.eval` and reports
 * on the done queue.
 *
 * Guarantees (SQS delivers at least once; results are exactly once):
 * - A job's message is deleted only after its result is stored and its done message sent, in
 *   that order: a worker that dies at any point leaves the job to be delivered again, never a
 *   lost result. Results are written first-writer-wins: a late duplicate (a worker frozen past
 *   its visibility) is logged, not stored. A job whose result exists is not run again.
 * - While a job runs its message stays invisible: the worker extends the visibility every third
 *   of `fleet.visibility_timeout` (heartbeat), for at most `fleet.heartbeat_cap` seconds, so a
 *   hung job still reaches another worker.
 * - It asks for at most as many messages as it has free slots, and never aborts a receive (an
 *   aborted long poll loses the messages it was about to return): to stop, it stops starting them.
 * - An attempt that ended without a result (`attemptFailed`: the sandbox would not start, the
 *   policy threw) is reported and offered again after `retry_delay` x attempt; SQS moves it to
 *   the dead-letter queue after `max_receive_count` receives. A sample's own failure (scorer
 *   crash, NOT_READY, a failing setup script) is a result, as in a local run.
 * - A message it cannot read (another protocol version, another fleet, not JSON) is never run and
 *   never deleted: it is handed back at once and SQS dead-letters it.
 * - First SIGTERM/SIGINT: no new receives; messages taken but not started are released
 *   (visibility 0); running samples are cancelled, their sandboxes removed, their messages
 *   released. Second: release everything held, tear down, exit.
 * - Before taking any job it fetches every setting the manifest pins, at the pinned commit
 *   (`settings-fetch.ts`), and reads tasks only from those checkouts; if it cannot, it exits
 *   with the error and the jobs stay queued for workers that can.
 * - It stops with 0 when the work is done: its queue is gone (the controller finished), or
 *   `idle_polls` polls in a row found nothing while nothing ran and the queue held nothing,
 *   visible or in flight.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config/config.js';
import { CloudError, ConfigError, SampleError, ScorerError, errorMessage } from '../errors.js';
import { readDotenvFile } from '../config/dotenv-file.js';
import { RunSession } from '../eval/run-session.js';
import { runSamplePool, type PoolItem } from '../eval/sample-pool.js';
import { backoffDelays, sleep } from '../host/backoff.js';
import type { EvalSample } from '../log/types.js';
import { ModelRegistry } from '../models/model-registry.js';
import { createPolicy } from '../policies/registry.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import type { GitRunner } from '../tasks/git-runner.js';
import type { Sample } from '../tasks/types.js';
import { fleetLogHeader, oneSampleLog } from './one-sample-log.js';
import { fetchPinnedSettings, settingsCacheDir } from './settings-fetch.js';
import { PROTOCOL_VERSION, type DoneMessage, type Job, type JobMessage, type Manifest } from './protocol.js';
import type { Delivery, JobQueue, ResultStore } from './types.js';

export interface WorkerOptions {
  queue: JobQueue;
  store: ResultStore;
  config: Config;
  /** Jobs run at once (default: the manifest's samples_per_worker). */
  concurrency?: number;
  /** Named in done messages and logs. */
  workerName: string;
  /** ct's version, for the logs' `packages`. */
  version: string;
  /** Relative paths (policy arguments, modules) are from here. */
  cwd: string;
  /** Fetches the pinned settings (settingsGitRunner: the credentials `ct settings pull` uses). */
  git: GitRunner;
  /** One line per event, for stderr. */
  log: (line: string) => void;
  /** Listen for SIGINT/SIGTERM (default true; in-process tests stop through `stop`). */
  handleSignals?: boolean;
  /** Aborting it stops the worker like a first signal. */
  stop?: AbortSignal;
  /**
   * Reads the spot interruption notice (EC2 workers: instance metadata): when one comes the
   * worker takes no more jobs, lets running ones finish until fleet.spot_handback_seconds before
   * the interruption, then queues the rest again as fresh messages (no attempt spent).
   */
  spotNotice?: () => Promise<Date | undefined>;
}

/** Why the worker stopped: `done` (queue drained), `fleet-gone` (queues deleted), `stopped` (signal), `preempted` (spot notice). */
export type WorkerStop = 'done' | 'fleet-gone' | 'stopped' | 'preempted';

/**
 * What became of one received message:
 * - ok: result stored (or refused as a late duplicate), done sent, message deleted;
 * - skipped: its result was already stored: done sent, message deleted;
 * - failed: no result this attempt: reported, offered again after the retry delay;
 * - released: the worker is stopping: visible again at once;
 * - unreadable: not a job this worker can run: handed back for the dead-letter queue;
 * - preempted: running when the spot instance was about to go: queued again as a fresh message.
 */
export type JobOutcome = 'ok' | 'skipped' | 'failed' | 'released' | 'unreadable' | 'preempted';

export interface WorkerResult {
  stopped: WorkerStop;
  /** Exit code: 0, or the stopping signal's (130 SIGINT, 143 SIGTERM). */
  exitCode: number;
  jobs: Record<JobOutcome, number>;
}

const execFileAsync = promisify(execFile);

/** Longest wait before a failed job is offered again (seconds). */
const MAX_RETRY_DELAY_SECONDS = 300;
/** Failed polls in a row before the worker gives up. */
const MAX_POLL_FAILURES = 5;
/** Characters of an error message a done message carries (SQS takes 256 KB a message). */
const MAX_ERROR_CHARS = 4000;

interface JobItem extends PoolItem {
  job: Job;
  delivery: Delivery<JobMessage>;
  startedAt: number;
  stopHeartbeat: () => void;
  /** The error the sample ended with (its class decides retry or result). */
  failure?: unknown;
  /** Queued again as a fresh message (spot interruption): its result is not kept. */
  requeued?: boolean;
}

/** Runs jobs of one fleet until the work is done or the worker is stopped. */
export async function runWorker(o: WorkerOptions): Promise<WorkerResult> {
  const { queue, store, config } = o;
  const manifest = await store.getManifest();
  if (!manifest) throw new ConfigError(`fleet ${queue.fleetId} has no manifest (wrong fleet id, bucket or region?)`);
  if (manifest.fleet_id !== queue.fleetId) throw new ConfigError(`the manifest belongs to fleet ${manifest.fleet_id}, not ${queue.fleetId}`);
  if (!(await queue.exists())) {
    o.log(`the queues of fleet ${manifest.fleet_id} are gone (the controller finished the fleet); nothing to do`);
    return { stopped: 'fleet-gone', exitCode: 0, jobs: { ok: 0, skipped: 0, failed: 0, released: 0, unreadable: 0, preempted: 0 } };
  }
  // Before any job: a worker that cannot get the pinned settings exits and leaves the jobs queued.
  const cacheDir = settingsCacheDir(config);
  const catalog = new SettingsCatalog(cacheDir, await fetchPinnedSettings(manifest.settings, { cacheDir, git: o.git, cwd: o.cwd, log: o.log }));
  const extraRoots = await unpackExtraSrc(store, manifest, o.log);
  if (manifest.sandbox.worker_setup) {
    await runWorkerSetup(extraRoots.dir, manifest.sandbox.worker_setup.path, config.fleet.worker_setup_env, o.log);
    applySetupEnv(config.fleet.worker_setup_env, o.log);
  }
  const importRoots = [o.cwd, ...extraRoots.roots];
  const policy = await createPolicy(manifest.policy.name, manifest.policy.args, {
    models: new ModelRegistry(config.models),
    cwd: o.cwd,
    importRoots,
  });
  const concurrency = o.concurrency ?? manifest.samples_per_worker;
  const session = await RunSession.open({ config, sandbox: manifest.sandbox.spec, importRoots, note: o.log, handleSignals: o.handleSignals ?? true });
  o.stop?.addEventListener('abort', () => session.stop(), { once: true });
  const header = fleetLogHeader(manifest, o.version);
  const counts: Record<JobOutcome, number> = { ok: 0, skipped: 0, failed: 0, released: 0, unreadable: 0, preempted: 0 };
  const runningItems = new Set<JobItem>();
  let preempted = false;
  const held = new Map<string, Delivery<JobMessage>>();
  let running = 0;
  let stop: WorkerStop = 'done';
  const removeHook = session.onForcedStop(async () => {
    await Promise.all([...held.values()].map((d) => queue.release(d.receiptHandle).catch(() => {})));
  });
  o.log(`worker ${o.workerName} (pid ${process.pid}): fleet ${manifest.fleet_id}, ${manifest.jobs.length} job(s) in the run, ${concurrency} at once, sandbox run ${session.runId}`);

  const seconds = (item: { startedAt: number }) => Math.round((Date.now() - item.startedAt) / 100) / 10;
  const sendDone = (d: Pick<DoneMessage, 'job_id' | 'status' | 'error' | 'attempt' | 'seconds'>) =>
    queue.sendDone({
      version: PROTOCOL_VERSION,
      fleet_id: manifest.fleet_id,
      worker: o.workerName,
      ...d,
      ...(d.status === 'ok' ? { key: `${manifest.fleet_id}/${d.job_id}.eval` } : {}),
      ...(d.error !== undefined ? { error: d.error.slice(0, MAX_ERROR_CHARS) } : {}),
    });
  const release = async (d: Delivery<JobMessage>) => {
    held.delete(d.receiptHandle);
    await queue.release(d.receiptHandle).catch((e) => o.log(`message ${d.messageId}: could not hand it back (offered again when its visibility passes): ${errorMessage(e)}`));
  };
  /** An attempt without a result: reported, and offered again after the retry delay. */
  const failAttempt = async (job: Job, d: Delivery<JobMessage>, error: string, secs: number) => {
    held.delete(d.receiptHandle);
    const delay = Math.min(config.fleet.retry_delay * d.receiveCount, MAX_RETRY_DELAY_SECONDS);
    await sendDone({ job_id: job.job_id, status: 'error', error, attempt: d.receiveCount, seconds: secs }).catch((e) =>
      o.log(`job ${job.job_id}: could not report its failure: ${errorMessage(e)}`),
    );
    await queue.extend(d.receiptHandle, delay).catch((e) => o.log(`job ${job.job_id}: could not hand its message back: ${errorMessage(e)}`));
    counts.failed++;
    o.log(`job ${job.job_id} failed in ${secs}s (attempt ${d.receiveCount}; offered again in ${delay}s): ${firstLine(error)}`);
  };
  const heartbeat = (job: Job, d: Delivery<JobMessage>): (() => void) => {
    const { visibility_timeout: vis, heartbeat_cap: cap } = config.fleet;
    const until = Date.now() + cap * 1000;
    const timer = setInterval(() => {
      if (Date.now() + vis * 1000 > until) {
        clearInterval(timer);
        o.log(`job ${job.job_id}: running past the heartbeat cap (${cap}s); its message will be offered to another worker`);
        return;
      }
      queue.extend(d.receiptHandle, vis).catch((e) => o.log(`job ${job.job_id}: heartbeat failed (another worker may get the job; results are keyed by job): ${errorMessage(e)}`));
    }, (vis * 1000) / 3);
    return () => clearInterval(timer);
  };

  /** Jobs from the work queue, received only for free slots; releases what it holds when closed. */
  const buffer: Delivery<JobMessage>[] = [];
  let emptyPolls = 0;
  let pollFailures = 0;
  const work: AsyncIterator<JobItem> & AsyncIterable<JobItem> = {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next(): Promise<IteratorResult<JobItem>> {
      for (;;) {
        if (session.signal.aborted || session.stopping.aborted) return releaseBuffer();
        const d = buffer.shift();
        if (d) {
          const item = await take(d);
          if (item) return { done: false, value: item };
          continue;
        }
        let got: Delivery<JobMessage>[];
        try {
          got = await queue.receive({ max: Math.max(1, concurrency - running), waitSeconds: config.fleet.poll_seconds });
          pollFailures = 0;
        } catch (e) {
          if (queueGone(e)) {
            o.log(`the work queue of fleet ${manifest.fleet_id} is gone (the controller finished the fleet); stopping`);
            stop = 'fleet-gone';
            return { done: true, value: undefined };
          }
          if (++pollFailures >= MAX_POLL_FAILURES) throw new CloudError(`polling the work queue failed ${pollFailures} times in a row: ${errorMessage(e)}`, false);
          o.log(`polling the work queue failed (${errorMessage(e)}); trying again`);
          await sleep(backoffDelays(pollFailures, 1000, 20_000)[pollFailures - 1]!, session.signal);
          continue;
        }
        for (const g of got) held.set(g.receiptHandle, g);
        buffer.push(...got);
        if (got.length > 0) {
          emptyPolls = 0;
          continue;
        }
        if (running > 0) continue;
        let depth;
        try {
          depth = (await queue.depth()).work;
        } catch (e) {
          if (queueGone(e)) {
            stop = 'fleet-gone';
            o.log(`the work queue of fleet ${manifest.fleet_id} is gone (the controller finished the fleet); stopping`);
            return { done: true, value: undefined };
          }
          continue;
        }
        emptyPolls = depth.visible + depth.inFlight === 0 ? emptyPolls + 1 : 0;
        if (emptyPolls >= config.fleet.idle_polls) {
          o.log(`the work queue stayed empty for ${emptyPolls} poll(s); the work is done`);
          return { done: true, value: undefined };
        }
      }
    },
    return: releaseBuffer,
  };

  /** Taken but never started: hand them straight back. */
  async function releaseBuffer(): Promise<IteratorResult<JobItem>> {
    const left = buffer.splice(0);
    await Promise.all(left.map((d) => release(d)));
    counts.released += left.length;
    return { done: true, value: undefined };
  }

  /** A received message turned into a sample to run, or handled here (unreadable, already done, cannot resolve). */
  async function take(d: Delivery<JobMessage>): Promise<JobItem | undefined> {
    const startedAt = Date.now();
    const problem = d.problem ?? (d.message && d.message.fleet_id !== manifest!.fleet_id ? `a job of fleet ${d.message.fleet_id}, not ${manifest!.fleet_id}` : undefined);
    if (!d.message || problem) {
      // Never run, never deleted: SQS dead-letters it after max_receive_count receives.
      await release(d);
      counts.unreadable++;
      o.log(`message ${d.messageId} not run (receive ${d.receiveCount}): ${problem ?? 'unreadable'}`);
      return undefined;
    }
    const job = d.message.job;
    try {
      if (await store.hasResult(job.job_id)) {
        await sendDone({ job_id: job.job_id, status: 'ok', attempt: d.receiveCount, seconds: 0 });
        await queue.delete(d.receiptHandle);
        held.delete(d.receiptHandle);
        counts.skipped++;
        o.log(`job ${job.job_id} skipped: its result is already stored`);
        return undefined;
      }
      const sample = resolveSample(catalog, job);
      o.log(`job ${job.job_id} started: ${job.sample_id} epoch ${job.epoch} (attempt ${d.receiveCount})`);
      return { sample, epoch: job.epoch, job, delivery: d, startedAt, stopHeartbeat: heartbeat(job, d) };
    } catch (e) {
      if (e instanceof CloudError) {
        // Checking for or skipping a stored result failed in AWS, not in the job: not an attempt.
        o.log(`job ${job.job_id}: ${errorMessage(e)}; handed back`);
        await release(d);
        return undefined;
      }
      await failAttempt(job, d, errorMessage(e), seconds({ startedAt }));
      return undefined;
    }
  }

  /** A finished sample: stored and reported, or (no result this attempt) handed back. */
  async function finish(item: JobItem, result: EvalSample): Promise<void> {
    const { job, delivery: d } = item;
    item.stopHeartbeat();
    if (item.requeued) return;
    try {
      if (session.signal.aborted && result.error) {
        await release(d);
        counts.released++;
        o.log(`job ${job.job_id} handed back after ${seconds(item)}s: the worker is stopping`);
        return;
      }
      if (item.failure !== undefined && attemptFailed(item.failure)) {
        await failAttempt(job, d, errorMessage(item.failure), seconds(item));
        return;
      }
      const put = await store.putResult(job.job_id, await oneSampleLog(result, header));
      await sendDone({ job_id: job.job_id, status: 'ok', attempt: d.receiveCount, seconds: seconds(item) });
      await queue.delete(d.receiptHandle);
      held.delete(d.receiptHandle);
      counts.ok++;
      if (!put.stored) o.log(`job ${job.job_id}: another worker stored its result first; this attempt's result was not kept`);
      else o.log(`job ${job.job_id} ok in ${seconds(item)}s${result.error ? ` (sample error: ${firstLine(result.error.message)})` : ''}`);
    } catch (e) {
      // Not stored or not reported: the message stays and is offered again when its visibility passes.
      o.log(`job ${job.job_id}: could not store or report its result (it will be offered again): ${errorMessage(e)}`);
    }
  }

  // Spot: a notice stops the taking at once; what still runs shortly before the deadline goes back to the queue.
  let handbackTimer: NodeJS.Timeout | undefined;
  const watchSpot = async () => {
    if (preempted || session.signal.aborted || !o.spotNotice) return;
    let at: Date | undefined;
    try {
      at = await o.spotNotice();
    } catch (e) {
      o.log(`reading the spot interruption notice failed: ${errorMessage(e)}`);
      return;
    }
    if (!at || preempted) return;
    preempted = true;
    clearInterval(spotWatch);
    const inMs = Math.max(0, at.getTime() - config.fleet.spot_handback_seconds * 1000 - Date.now());
    o.log(`spot interruption notice: the instance goes at ${at.toISOString()}; no new jobs, ${running} running job(s) get ${Math.round(inMs / 1000)}s to finish`);
    session.drain();
    handbackTimer = setTimeout(() => void handBack(), inMs);
  };
  const spotWatch = o.spotNotice ? setInterval(() => void watchSpot(), config.fleet.spot_poll_seconds * 1000) : undefined;
  /** Jobs still running at the spot deadline: queued again as fresh messages (no attempt spent), then cancelled. */
  async function handBack(): Promise<void> {
    for (const item of [...runningItems]) {
      const { job, delivery: d } = item;
      item.requeued = true;
      item.stopHeartbeat();
      try {
        const sent = await queue.enqueue([d.message!]);
        if (sent.failed > 0) throw new Error('SQS refused the message');
        await queue.delete(d.receiptHandle);
        held.delete(d.receiptHandle);
        counts.preempted++;
        await sendDone({ job_id: job.job_id, status: 'preempted', attempt: d.receiveCount, seconds: seconds(item) }).catch(() => {});
        o.log(`job ${job.job_id} preempted after ${seconds(item)}s: queued again as a fresh message`);
      } catch (e) {
        o.log(`job ${job.job_id}: could not queue it again (its message returns when its visibility passes): ${errorMessage(e)}`);
      }
    }
    session.stop();
  }

  try {
    await runSamplePool<JobItem>({
      work,
      maxSamples: concurrency,
      provider: session.provider,
      policy,
      sampleOptions: manifest.sample_options,
      signal: session.signal,
      prepareEnvironment: (item) => session.prepareEnvironment({ name: item.sample.env.id, composeFile: item.sample.env.composeFile }),
      onStart: (item) => {
        running++;
        runningItems.add(item);
      },
      onError: (item, e) => (item.failure = e),
      onResult: async (item, sample) => {
        try {
          await finish(item, sample);
        } finally {
          running--;
          runningItems.delete(item);
        }
      },
    });
  } finally {
    clearInterval(spotWatch);
    clearTimeout(handbackTimer);
    removeHook();
    await session.close();
    await rm(extraRoots.dir, { recursive: true, force: true }).catch(() => {});
  }
  if (preempted) stop = 'preempted';
  else if (session.signal.aborted) stop = 'stopped';
  o.log(
    `worker ${o.workerName} stopped (${stop}): ${counts.ok} result(s), ${counts.skipped} already done, ${counts.failed} failed attempt(s), ` +
      `${counts.released} released, ${counts.unreadable} unreadable message(s), ${counts.preempted} preempted`,
  );
  return { stopped: stop, exitCode: stop === 'stopped' ? session.stoppedExitCode : 0, jobs: counts };
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

/**
 * The manifest's extra-src trees, downloaded and unpacked as `<dir>/<name>/` (each an import root
 * for `module:export` policies and sandboxes, like PYTHONPATH=DIR).
 */
async function unpackExtraSrc(store: ResultStore, manifest: Manifest, log: (line: string) => void): Promise<{ dir: string; roots: string[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'ct-extra-src-'));
  const roots: string[] = [];
  for (const x of manifest.extra_src) {
    const gz = await store.getArtifact(x.sha256);
    if (!gz) throw new ConfigError(`extra-src tree ${x.name} (artifact ${x.sha256}) is missing from the bucket; run the controller again to upload it`);
    // The archive holds `{name}/...`.
    const root = join(dir, x.name);
    const file = join(dir, `${x.name}.tar.gz`);
    await writeFile(file, gz);
    await execFileAsync('tar', ['-xzf', file, '-C', dir, '--no-same-owner']);
    await mkdir(root, { recursive: true });
    await rm(file, { force: true });
    roots.push(root);
    log(`extra-src ${x.name} unpacked in ${root}`);
  }
  return { dir, roots };
}

/**
 * `--worker-setup`: the script inside an extra-src tree, run once before any job is taken, from
 * the folder the trees are unpacked in. It finds the file to leave variables in (`envFile`,
 * fleet.worker_setup_env) in $CT_FLEET_WORKER_SETUP_ENV, whatever set it (the default, the
 * config file, the variable), so one script works on EC2 workers and on any other machine.
 */
async function runWorkerSetup(dir: string, path: string, envFile: string, log: (line: string) => void): Promise<void> {
  log(`running worker setup ${path}`);
  try {
    const r = await execFileAsync('sh', [join(dir, path)], { cwd: dir, env: { ...process.env, CT_FLEET_WORKER_SETUP_ENV: envFile }, maxBuffer: 16 * 1024 * 1024 });
    if (r.stdout.trim()) log(r.stdout.trim().split('\n').slice(-5).join('\n'));
  } catch (e) {
    throw new ConfigError(`worker setup ${path} failed: ${errorMessage(e).split('\n').slice(-5).join('\n')}`);
  }
}

/**
 * The variables a setup script left in `file` (NAME=value lines), for the sandbox: set in this
 * process's environment, which providers and their tools inherit; a variable already set wins.
 */
function applySetupEnv(file: string, log: (line: string) => void): void {
  if (!existsSync(file)) return;
  const vars = readDotenvFile(file);
  const set = Object.keys(vars).filter((k) => process.env[k] === undefined);
  for (const k of set) process.env[k] = vars[k];
  log(`worker setup environment from ${file}: ${set.join(', ') || 'nothing new'}`);
}

/** The job's sample from the settings the manifest pins. */
function resolveSample(catalog: SettingsCatalog, job: Job): Sample {
  const env = catalog.resolve(`${job.setting}:${job.env}`);
  const main = env.mainTasks.get(job.main_task);
  const side = job.side_task ? env.sideTasks.get(job.side_task) : undefined;
  if (!main || (job.side_task && !side)) {
    throw new ConfigError(`job ${job.job_id}: ${job.setting}:${job.env} has no ${!main ? `main task ${job.main_task}` : `side task ${job.side_task}`} here`);
  }
  const sample: Sample = { id: [env.id, main.id, ...(side ? [side.id] : [])].join(':'), env, mainTask: main, ...(side ? { sideTask: side } : {}) };
  if (sample.id !== job.sample_id) throw new ConfigError(`job ${job.job_id} names sample ${job.sample_id}, but its env and tasks make ${sample.id}`);
  return sample;
}

/** The fleet's queues were deleted (the controller finished). */
export function queueGone(e: unknown): boolean {
  return e instanceof CloudError && e.code === 'QueueDoesNotExist';
}

function firstLine(s: string): string {
  return s.split('\n')[0]!.slice(0, 200);
}

export type { Manifest };

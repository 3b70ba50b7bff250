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
 * - Attempts are counted by ct (protocol.ts: the message's `attempts` + SQS's receive count). An
 *   attempt that ended without a result (`sampleEnd` = no-result: the sandbox would not start, the
 *   policy threw) is recorded in the job's history and offered again after `retry_delay` x
 *   attempt as a fresh message; after the manifest's `max_attempts` the worker moves it to the
 *   dead-letter queue. A delivery whose earlier receives all died silently counts them too. A
 *   sample's own failure (scorer crash, NOT_READY, a failing setup script) is a result, as in a
 *   local run, and is marked as an error result (`errors/`) so a rerun retries it.
 * - Before starting a sandbox it checks the message's generation against the queue ledger: a
 *   message a resumed controller superseded is dropped unrun.
 * - A message it cannot read (another protocol version, another fleet, not JSON) is never run and
 *   never deleted: it is handed back at once and SQS dead-letters it.
 * - First SIGTERM/SIGINT (or, with `parentGone`, its controller's death): no new receives;
 *   messages taken but not started, and running samples once cancelled (sandboxes removed), are
 *   handed back as fresh messages that spend no attempt. Second: release everything held (no
 *   time for fresh messages), tear down, exit.
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
import { CloudError, ConfigError, errorMessage, type SampleEnd } from '../errors.js';
import { readDotenvFile } from '../config/dotenv-file.js';
import { RunSession } from '../eval/run-session.js';
import { runSamplePool, type PoolItem } from '../eval/sample-pool.js';
import type { EvalSample } from '../log/types.js';
import { ModelRegistry } from '../models/model-registry.js';
import { createPolicy } from '../policies/registry.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import type { GitRunner } from '../tasks/git-runner.js';
import type { Sample } from '../tasks/types.js';
import { fleetLogHeader, oneSampleLog } from './one-sample-log.js';
import { fetchPinnedSettings, settingsCacheDir } from './settings-fetch.js';
import { JobSource } from './job-source.js';
import { Lease } from './lease.js';
import { MAX_HISTORY, MAX_HISTORY_ERROR, PROTOCOL_VERSION, ticketIsCurrent, type AttemptRecord, type DoneMessage, type Job, type Manifest, type ParsedJobMessage } from './protocol.js';
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
  /** Aborted when the controller that started this worker is gone (`--exit-with-parent`): stop as on a first signal. */
  parentGone?: AbortSignal;
}

/** Why the worker stopped: `done` (queue drained), `fleet-gone` (queues deleted), `stopped` (signal), `preempted` (spot notice). */
export type WorkerStop = 'done' | 'fleet-gone' | 'stopped' | 'preempted';

/**
 * What became of one received message:
 * - ok: result stored (or refused as a late duplicate), done sent, message deleted;
 * - skipped: its result was already stored: done sent, message deleted;
 * - failed: no result this attempt: reported, offered again after the retry delay;
 * - dead: its attempts are spent: moved to the dead-letter queue with its history;
 * - superseded: a message of an earlier generation (a resumed controller queued the job again): dropped unrun;
 * - released: the worker is stopping: handed back as a fresh message (no attempt spent);
 * - unreadable: not a job this worker can run: handed back for the dead-letter queue;
 * - preempted: running when the spot instance was about to go: queued again as a fresh message.
 */
export type JobOutcome = 'ok' | 'skipped' | 'failed' | 'released' | 'unreadable' | 'preempted' | 'dead' | 'superseded';

export interface WorkerResult {
  stopped: WorkerStop;
  /** Exit code: 0, or the stopping signal's (130 SIGINT, 143 SIGTERM). */
  exitCode: number;
  jobs: Record<JobOutcome, number>;
}

const execFileAsync = promisify(execFile);

/** Longest wait before a failed job is offered again (seconds). */
const MAX_RETRY_DELAY_SECONDS = 300;
/** Characters of an error message a done message carries (SQS takes 256 KB a message). */
const MAX_ERROR_CHARS = 4000;

interface JobItem extends PoolItem {
  job: Job;
  delivery: Delivery<ParsedJobMessage>;
  startedAt: number;
  lease: Lease;
  /** Queued again as a fresh message (spot interruption): its result is not kept. */
  requeued?: boolean;
}

/** Runs jobs of one fleet until the work is done or the worker is stopped. */
export async function runWorker(o: WorkerOptions): Promise<WorkerResult> {
  const { queue, store, config } = o;
  const manifest = await store.getManifest();
  if (!manifest) throw new ConfigError(`fleet ${queue.fleetId} has no manifest (wrong fleet id, bucket or region?)`);
  if (manifest.fleet_id !== queue.fleetId) throw new ConfigError(`the manifest belongs to fleet ${manifest.fleet_id}, not ${queue.fleetId}`);
  const counts: Record<JobOutcome, number> = { ok: 0, skipped: 0, failed: 0, released: 0, unreadable: 0, preempted: 0, dead: 0, superseded: 0 };
  if (!(await queue.exists())) {
    o.log(`the queues of fleet ${manifest.fleet_id} are gone (the controller finished the fleet); nothing to do`);
    return { stopped: 'fleet-gone', exitCode: 0, jobs: counts };
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
  const maxAttempts = manifest.max_attempts;
  const session = await RunSession.open({ config, sandbox: manifest.sandbox.spec, importRoots, note: o.log, handleSignals: o.handleSignals ?? true });
  o.stop?.addEventListener('abort', () => session.stop(), { once: true });
  const header = fleetLogHeader(manifest, o.version);
  const runningItems = new Set<JobItem>();
  let preempted = false;
  const held = new Map<string, Delivery<ParsedJobMessage>>();
  const removeHook = session.onForcedStop(async () => {
    // Forced: no time for fresh messages. Visible again at once (each costs a receive, which the backstop allows for).
    await Promise.all([...held.values()].map((d) => queue.release(d.receiptHandle).catch(() => {})));
  });
  o.log(`worker ${o.workerName} (pid ${process.pid}): fleet ${manifest.fleet_id}, ${manifest.jobs.length} job(s) in the run, ${concurrency} at once, sandbox run ${session.runId}`);

  const seconds = (item: { startedAt: number }) => Math.round((Date.now() - item.startedAt) / 100) / 10;
  const sendDone = (d: Pick<DoneMessage, 'job_id' | 'status' | 'error' | 'attempt' | 'seconds' | 'reason'>) =>
    queue
      .sendDone({
        version: PROTOCOL_VERSION,
        fleet_id: manifest.fleet_id,
        worker: o.workerName,
        ...d,
        ...(d.status === 'ok' ? { key: `${manifest.fleet_id}/${d.job_id}.eval` } : {}),
        ...(d.error !== undefined ? { error: d.error.slice(0, MAX_ERROR_CHARS) } : {}),
      })
      .catch((e) => o.log(`job ${d.job_id}: could not send its ${d.status} report: ${errorMessage(e)}`));
  /** The attempt this delivery is: attempts spent by earlier messages + this message's receives. */
  const attemptOf = (d: Delivery<ParsedJobMessage>) => d.message!.attempts + d.receiveCount;

  /**
   * Queues the job again as a fresh message, then deletes this one: what a hand-back (no attempt
   * spent: `attempts` counts only this message's earlier receives, which died) and a reported
   * failure (this attempt spent, `delaySeconds` before the next) both do.
   */
  const requeue = async (d: Delivery<ParsedJobMessage>, next: { attempts: number; history: AttemptRecord[]; delaySeconds?: number }): Promise<boolean> => {
    const m = d.message!;
    try {
      const sent = await queue.enqueue([{ ...m, attempts: next.attempts, history: next.history }], next.delaySeconds ? { delaySeconds: next.delaySeconds } : {});
      if (sent.failed > 0) throw new Error('SQS refused the message');
    } catch (e) {
      // The message stays ours until its visibility passes; then it is offered again (one more receive).
      o.log(`job ${m.job.job_id}: could not queue it again (its message returns when its visibility passes): ${errorMessage(e)}`);
      held.delete(d.receiptHandle);
      return false;
    }
    held.delete(d.receiptHandle);
    await queue.delete(d.receiptHandle).catch((e) => o.log(`job ${m.job.job_id}: could not delete its old message (a worker will find it superseded or done): ${errorMessage(e)}`));
    return true;
  };
  /** Hands jobs back without spending an attempt: the worker is stopping, or its spot instance goes. */
  const handBack = async (ds: Delivery<ParsedJobMessage>[], reason: 'stopping' | 'spot', elapsed = 0): Promise<void> => {
    await Promise.all(
      ds.map(async (d) => {
        if (!d.message) return release(d);
        const job = d.message.job;
        if (await requeue(d, { attempts: attemptOf(d) - 1, history: d.message.history })) {
          if (reason === 'spot') counts.preempted++;
          else counts.released++;
          await sendDone({ job_id: job.job_id, status: 'handed_back', reason, attempt: attemptOf(d), seconds: elapsed });
          o.log(`job ${job.job_id} handed back (${reason === 'spot' ? 'spot interruption' : 'the worker is stopping'}): queued again, no attempt spent`);
        }
      }),
    );
  };
  const release = async (d: Delivery<ParsedJobMessage>) => {
    held.delete(d.receiptHandle);
    await queue.release(d.receiptHandle).catch((e) => o.log(`message ${d.messageId}: could not hand it back (offered again when its visibility passes): ${errorMessage(e)}`));
  };
  /** A job whose attempts are spent: on the dead-letter queue with its history, for the controller to record. */
  const deadLetter = async (d: Delivery<ParsedJobMessage>, reason: string, attempts: number, history: AttemptRecord[]) => {
    const m = d.message!;
    try {
      await queue.deadLetter({ ...m, attempts, history, dead: { reason: reason.slice(0, MAX_HISTORY_ERROR), attempts } });
    } catch (e) {
      o.log(`job ${m.job.job_id}: could not move it to the dead-letter queue (offered again when its visibility passes): ${errorMessage(e)}`);
      held.delete(d.receiptHandle);
      return;
    }
    held.delete(d.receiptHandle);
    await queue.delete(d.receiptHandle).catch(() => {});
    counts.dead++;
    await sendDone({ job_id: m.job.job_id, status: 'dead', error: reason, attempt: attempts, seconds: 0 });
    o.log(`job ${m.job.job_id} failed for good after ${attempts} attempt(s): ${firstLine(reason)}`);
  };
  /** An attempt without a result: recorded in the job's history, and offered again after the retry delay (or dead when none is left). */
  const failAttempt = async (d: Delivery<ParsedJobMessage>, error: string, secs: number) => {
    const m = d.message!;
    const attempt = attemptOf(d);
    const history = [...m.history, { attempt, worker: o.workerName, error: error.slice(0, MAX_HISTORY_ERROR) }].slice(-MAX_HISTORY);
    counts.failed++;
    if (attempt >= maxAttempts) return deadLetter(d, error, attempt, history);
    const delay = Math.min(config.fleet.retry_delay * attempt, MAX_RETRY_DELAY_SECONDS);
    await sendDone({ job_id: m.job.job_id, status: 'error', error, attempt, seconds: secs });
    await requeue(d, { attempts: attempt, history, delaySeconds: delay });
    o.log(`job ${m.job.job_id} failed in ${secs}s (attempt ${attempt} of ${maxAttempts}; offered again in ${delay}s): ${firstLine(error)}`);
  };

  /** A received message turned into a sample to run, or handled here (unreadable, superseded, already done, dead, cannot resolve). */
  const take = async (d: Delivery<ParsedJobMessage>): Promise<JobItem | undefined> => {
    held.set(d.receiptHandle, d);
    const startedAt = Date.now();
    const problem = d.problem ?? (d.message && d.message.fleet_id !== manifest.fleet_id ? `a job of fleet ${d.message.fleet_id}, not ${manifest.fleet_id}` : undefined);
    if (!d.message || problem) {
      // Never run, never deleted: SQS dead-letters it after its backstop receive count.
      await release(d);
      counts.unreadable++;
      o.log(`message ${d.messageId} not run (receive ${d.receiveCount}): ${problem ?? 'unreadable'}`);
      return undefined;
    }
    const m = d.message;
    const job = m.job;
    const attempt = attemptOf(d);
    try {
      // A message of a superseded generation: its job has a newer message (or a result); dropped unrun.
      if (!ticketIsCurrent(await store.getLedger(), job.job_id, m.ticket)) {
        held.delete(d.receiptHandle);
        await queue.delete(d.receiptHandle);
        counts.superseded++;
        await sendDone({ job_id: job.job_id, status: 'superseded', attempt, seconds: 0 });
        o.log(`job ${job.job_id}: a message of an earlier generation (${m.ticket}) dropped unrun`);
        return undefined;
      }
      if (await store.hasResult(job.job_id)) {
        await sendDone({ job_id: job.job_id, status: 'ok', attempt, seconds: 0 });
        held.delete(d.receiptHandle);
        await queue.delete(d.receiptHandle);
        counts.skipped++;
        o.log(`job ${job.job_id} skipped: its result is already stored`);
        return undefined;
      }
    } catch (e) {
      if (!(e instanceof CloudError)) throw e;
      // Reading the ledger or the result failed in AWS, not in the job: handed back, not an attempt.
      o.log(`job ${job.job_id}: ${errorMessage(e)}; handed back`);
      await handBack([d], 'stopping');
      return undefined;
    }
    if (attempt > maxAttempts) {
      // Its earlier deliveries ended with no report (the worker died, or froze past the visibility).
      const silent = attempt - 1 - m.history.length;
      const reason =
        m.history.length > 0
          ? `${m.history[m.history.length - 1]!.error}${silent > 0 ? ` (and ${silent} attempt(s) ended without a report: the worker died or froze past the visibility timeout)` : ''}`
          : `no worker reported why: ${attempt - 1} attempt(s) ended without a report (the worker died, or froze past the visibility timeout)`;
      await deadLetter(d, reason, attempt - 1, m.history);
      return undefined;
    }
    try {
      const sample = resolveSample(catalog, job);
      o.log(`job ${job.job_id} started: ${job.sample_id} epoch ${job.epoch} (attempt ${attempt} of ${maxAttempts})`);
      const lease = new Lease({ queue, receiptHandle: d.receiptHandle, jobId: job.job_id, visibilitySeconds: config.fleet.visibility_timeout, capSeconds: config.fleet.heartbeat_cap, log: o.log }).start();
      return { sample, epoch: job.epoch, job, delivery: d, startedAt, lease };
    } catch (e) {
      await failAttempt(d, errorMessage(e), seconds({ startedAt }));
      return undefined;
    }
  };

  /** A finished sample: stored and reported, or (no result this attempt) offered again. */
  const finish = async (item: JobItem, result: EvalSample, end: SampleEnd, reason?: string): Promise<void> => {
    const { job, delivery: d } = item;
    item.lease.stop();
    if (item.requeued) return;
    try {
      if (session.signal.aborted && result.error) {
        await handBack([d], 'stopping', seconds(item));
        return;
      }
      if (end === 'no-result') {
        await failAttempt(d, reason ?? result.error?.message ?? 'the attempt produced no result', seconds(item));
        return;
      }
      const put = await store.putResult(job.job_id, await oneSampleLog(result, header));
      // An error result is marked, so a rerun finds what to retry without reading every result.
      if (put.stored && result.error) await store.putErrorMarker({ job_id: job.job_id, kind: 'sample', error: firstLine(result.error.message) });
      await sendDone({ job_id: job.job_id, status: 'ok', attempt: attemptOf(d), seconds: seconds(item) });
      await queue.delete(d.receiptHandle);
      held.delete(d.receiptHandle);
      counts.ok++;
      if (!put.stored) o.log(`job ${job.job_id}: another worker stored its result first; this attempt's result was not kept`);
      else o.log(`job ${job.job_id} ok in ${seconds(item)}s${result.error ? ` (sample error: ${firstLine(result.error.message)})` : ''}`);
    } catch (e) {
      // Not stored or not reported: the message stays and is offered again when its visibility passes.
      o.log(`job ${job.job_id}: could not store or report its result (it will be offered again): ${errorMessage(e)}`);
    }
  };

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
    o.log(`spot interruption notice: the instance goes at ${at.toISOString()}; no new jobs, ${runningItems.size} running job(s) get ${Math.round(inMs / 1000)}s to finish`);
    session.drain();
    handbackTimer = setTimeout(() => void spotHandBack(), inMs);
  };
  const spotWatch = o.spotNotice ? setInterval(() => void watchSpot(), config.fleet.spot_poll_seconds * 1000) : undefined;
  /** Jobs still running at the spot deadline: queued again as fresh messages (no attempt spent), then cancelled. */
  async function spotHandBack(): Promise<void> {
    const items = [...runningItems];
    for (const item of items) {
      item.requeued = true;
      item.lease.stop();
    }
    await Promise.all(items.map((item) => handBack([item.delivery], 'spot', seconds(item))));
    session.stop();
  }

  // The controller that started this worker is gone (local workers): stop as on a first signal.
  const parentGone = () => {
    o.log('the controller that started this worker is gone: handing back its jobs and stopping');
    session.stop();
  };
  o.parentGone?.addEventListener('abort', parentGone, { once: true });

  const source = new JobSource<JobItem>({
    queue,
    concurrency,
    running: () => runningItems.size,
    pollSeconds: config.fleet.poll_seconds,
    idlePolls: config.fleet.idle_polls,
    stopped: () => session.signal.aborted || session.stopping.aborted,
    signal: session.signal,
    take,
    handBack: (ds) => handBack(ds, preempted ? 'spot' : 'stopping'),
    log: o.log,
  });
  try {
    await runSamplePool<JobItem>({
      work: source,
      maxSamples: concurrency,
      provider: session.provider,
      policy,
      sampleOptions: manifest.sample_options,
      signal: session.signal,
      prepareEnvironment: (item) => session.prepareEnvironment({ name: item.sample.env.id, composeFile: item.sample.env.composeFile }),
      onStart: (item) => runningItems.add(item),
      onResult: async (item, sample, end, reason) => {
        try {
          await finish(item, sample, end, reason);
        } finally {
          runningItems.delete(item);
        }
      },
    });
  } finally {
    clearInterval(spotWatch);
    clearTimeout(handbackTimer);
    o.parentGone?.removeEventListener('abort', parentGone);
    removeHook();
    await session.close();
    await rm(extraRoots.dir, { recursive: true, force: true }).catch(() => {});
  }
  let stop: WorkerStop = source.end === 'fleet-gone' ? 'fleet-gone' : 'done';
  if (preempted) stop = 'preempted';
  else if (session.signal.aborted) stop = 'stopped';
  o.log(
    `worker ${o.workerName} stopped (${stop}): ${counts.ok} result(s), ${counts.skipped} already done, ${counts.failed} failed attempt(s), ${counts.dead} dead, ` +
      `${counts.released} handed back, ${counts.superseded} superseded, ${counts.unreadable} unreadable message(s), ${counts.preempted} preempted`,
  );
  return { stopped: stop, exitCode: stop === 'stopped' ? session.stoppedExitCode : 0, jobs: counts };
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

function firstLine(s: string): string {
  return s.split('\n')[0]!.slice(0, 200);
}

export type { Manifest };

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
 *   A slot takes the next job as soon as its own ends, whatever the other slots still run.
 * - How many samples it runs at once adapts (`adaptive-concurrency.ts`): from the manifest's
 *   samples_per_worker cut to this machine, one more after each clean finish with every slot busy
 *   (while memory and CPUs allow, up to fleet.max_concurrency), halved after a sandbox start
 *   failure or a memory kill, a quarter less under memory pressure. `--concurrency N` fixes it at
 *   N. Each change is logged and reported on the done queue (the controller records it).
 * - Attempts are counted by ct (protocol.ts: the message's `attempts` + SQS's receive count). An
 *   attempt that ended without a result (`sampleEnd` = no-result: the sandbox would not start, the
 *   policy threw) is recorded in the job's history and offered again after `retry_delay` x
 *   attempt as a fresh message; after the manifest's `max_attempts` the worker moves it to the
 *   dead-letter queue. A delivery whose earlier receives all died silently counts them too. A
 *   sample's own failure (scorer crash, NOT_READY, a failing setup script) is a result, as in a
 *   local run, and is marked as an error result (`errors/`) so a rerun retries it.
 * - Before starting a sandbox it checks the message's generation against the queue ledger: a
 *   message a resumed controller superseded is dropped unrun.
 * - A message that is not a runnable job of this fleet is never run: not JSON, another protocol
 *   version, fields the protocol does not have, a body over MAX_MESSAGE_BYTES, another fleet's id,
 *   a job id the manifest does not list or a job that differs from the manifest's job of that id,
 *   spent attempts or a generation no controller of this fleet wrote. It goes to the dead-letter
 *   queue at once as a record of the reason (`JobMessages.reject`), which the controller reports;
 *   no result is ever stored for it.
 * - First SIGTERM/SIGINT (or, with `parentGone`, its controller's death): no new receives;
 *   messages taken but not started, and running samples once cancelled (sandboxes removed), are
 *   handed back as fresh messages that spend no attempt. Second: release everything held (no
 *   time for fresh messages), tear down, exit.
 * - Before taking any job it fetches every setting the manifest pins, at the pinned commit
 *   (`settings-fetch.ts`), and reads tasks only from those checkouts; if it cannot, it exits
 *   with the error and the jobs stay queued for workers that can.
 * - It stops with 0 when the work is done: its queue is gone (the controller finished), or
 *   `idle_polls` polls in a row found nothing while nothing ran and the queue held nothing,
 *   visible or in flight; and when it has had no job for fleet.idle_minutes while the fleet goes
 *   on (another worker's long job): an EC2 worker's instance then shuts down and terminates.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Config } from '../config/config.js';
import { CloudError, ConfigError, errorMessage, type SampleEnd } from '../errors.js';
import { RunSession } from '../eval/run-session.js';
import type { EvalSample } from '../log/types.js';
import type { GitRunner } from '../tasks/git-runner.js';
import { AdaptiveConcurrency, DEFAULT_SAMPLE_NEEDS, sampleVerdict, systemProbes, type ConcurrencyChange, type MachineProbes } from './adaptive-concurrency.js';
import { evalJobHandler } from './eval-job-handler.js';
import { JobSource } from './job-source.js';
import type { JobHandler, JobItem } from './job-handler.js';
import { Lease } from './lease.js';
import { JobMessages, type MessageCounts } from './job-messages.js';
import { isMonitorManifest, jobMismatch, ticketIsCurrent, type AnyManifest, type Manifest, type ParsedJobMessage } from './protocol.js';
import type { Delivery, JobQueue, ResultStore } from './types.js';

export interface WorkerOptions {
  queue: JobQueue;
  store: ResultStore;
  config: Config;
  /** Jobs run at once, fixed (`--concurrency`); default: the manifest's samples_per_worker as the start, adapted to the machine. */
  concurrency?: number;
  /** The machine as the concurrency rule reads it (default: this one's /proc and cgroup files, Date.now). */
  probes?: MachineProbes;
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
  /** Seconds to wait for the fleet's manifest and work queue (a worker started while its controller sets the fleet up); default 0. */
  waitForFleetSeconds?: number;
}

/**
 * Why the worker stopped: `done` (queue drained), `fleet-gone` (queues deleted), `idle` (no job
 * for fleet.idle_minutes while the fleet goes on), `stopped` (signal), `preempted` (spot notice).
 */
export type WorkerStop = 'done' | 'fleet-gone' | 'idle' | 'stopped' | 'preempted';

/** How often a worker looks at its machine for memory pressure (10 s). */
const PRESSURE_CHECK_MS = 10_000;

/**
 * What became of one received message:
 * - ok: result stored (or refused as a late duplicate), done sent, message deleted;
 * - skipped: its result was already stored: done sent, message deleted;
 * - failed: no result this attempt: reported, offered again after the retry delay;
 * - dead: its attempts are spent: moved to the dead-letter queue with its history;
 * - superseded: a message of an earlier generation (a resumed controller queued the job again): dropped unrun;
 * - released: the worker is stopping: handed back as a fresh message (no attempt spent);
 * - rejected: not a runnable job of this fleet (forged, damaged, too large): moved to the dead-letter queue unrun, with the reason;
 * - preempted: running when the spot instance was about to go: queued again as a fresh message.
 */
export type JobOutcome = keyof MessageCounts;

export interface WorkerResult {
  stopped: WorkerStop;
  /** Exit code: 0, or the stopping signal's (130 SIGINT, 143 SIGTERM). */
  exitCode: number;
  jobs: MessageCounts;
}

const execFileAsync = promisify(execFile);

/** Runs jobs of one fleet until the work is done or the worker is stopped. */
export async function runWorker(o: WorkerOptions): Promise<WorkerResult> {
  const { queue, store, config } = o;
  const manifest = await waitForFleet(o);
  if (!manifest) throw new ConfigError(`fleet ${queue.fleetId} has no manifest (wrong fleet id, bucket or region?)`);
  if (manifest.fleet_id !== queue.fleetId) throw new ConfigError(`the manifest belongs to fleet ${manifest.fleet_id}, not ${queue.fleetId}`);
  const messages = new JobMessages({ queue, fleetId: manifest.fleet_id, workerName: o.workerName, maxAttempts: manifest.max_attempts, retryDelay: config.fleet.retry_delay, log: o.log });
  const counts = messages.counts;
  if (!(await queue.exists())) {
    o.log(`the queues of fleet ${manifest.fleet_id} are gone (the controller finished the fleet); nothing to do`);
    return { stopped: 'fleet-gone', exitCode: 0, jobs: counts };
  }
  const extraRoots = await unpackExtraSrc(store, manifest, o.log);
  const importRoots = [o.cwd, ...extraRoots.roots];
  let handler: JobHandler<unknown>;
  try {
    handler = (await handlerFor(manifest, o, extraRoots.dir, importRoots)) as JobHandler<unknown>;
  } catch (e) {
    await rm(extraRoots.dir, { recursive: true, force: true }).catch(() => {});
    throw e;
  }
  const probes = o.probes ?? systemProbes();
  // Fixed: the worker's --concurrency, the run's explicit one (`concurrency_fixed`), or a monitor
  // fleet's (its model connections, not the machine, bound it).
  const fixed = o.concurrency !== undefined || isMonitorManifest(manifest) || manifest.concurrency_fixed === true;
  const concurrency = new AdaptiveConcurrency({
    requested: o.concurrency ?? manifest.samples_per_worker,
    ceiling: config.fleet.max_concurrency,
    fixed,
    needs: handler.needs?.() ?? DEFAULT_SAMPLE_NEEDS,
    probes,
  });
  // The pool's slots: what the concurrency may ever reach; the job source holds them to its current value.
  const slots = fixed ? concurrency.current : Math.max(concurrency.current, config.fleet.max_concurrency);
  const maxAttempts = manifest.max_attempts;
  const session = await RunSession.open({ config, ...(handler.sandbox ? { sandbox: handler.sandbox } : {}), importRoots, note: o.log, handleSignals: o.handleSignals ?? true });
  o.stop?.addEventListener('abort', () => session.stop(), { once: true });
  type Item = JobItem<unknown>;
  const runningItems = new Set<Item>();
  let preempted = false;
  const removeHook = session.onForcedStop(() => messages.releaseAll());
  o.log(
    `worker ${o.workerName} (pid ${process.pid}): ${isMonitorManifest(manifest) ? 'monitor ' : ''}fleet ${manifest.fleet_id}, ${manifest.jobs.length} job(s) in the run, ${concurrency.started} at once` +
      (handler.sandbox ? `, sandbox run ${session.runId}` : ''),
  );

  const seconds = (item: { startedAt: number }) => Math.round((Date.now() - item.startedAt) / 100) / 10;

  /** A received message turned into a sample to run, or handled here (unreadable, superseded, already done, dead, cannot resolve). */
  const take = async (d: Delivery<ParsedJobMessage>): Promise<Item | undefined> => {
    messages.hold(d);
    const startedAt = Date.now();
    const refuse = async (problem: string) => {
      await messages.reject(d, problem);
      o.log(`message ${d.messageId} not run (receive ${d.receiveCount}): ${problem}; moved to the dead-letter queue`);
      return undefined;
    };
    const problem = d.problem ?? (d.message ? notRunnable(d.message, manifest) : 'unreadable');
    if (!d.message || problem) return refuse(problem ?? 'unreadable');
    const m = d.message;
    const job = m.job;
    const attempt = messages.attemptOf(d);
    try {
      const ledger = await store.getLedger();
      // Controllers write a generation to the ledger before sending any message of it.
      if (ledger && m.ticket > ledger.generation) return refuse(`its generation ${m.ticket} is newer than any a controller of this fleet queued (${ledger.generation})`);
      // A message of a superseded generation: its job has a newer message (or a result); dropped unrun.
      if (!ticketIsCurrent(ledger, job.job_id, m.ticket)) {
        await messages.remove(d);
        counts.superseded++;
        await messages.report({ job_id: job.job_id, status: 'superseded', attempt, seconds: 0 });
        o.log(`job ${job.job_id}: a message of an earlier generation (${m.ticket}) dropped unrun`);
        return undefined;
      }
      if (await store.hasResult(job.job_id)) {
        await messages.report({ job_id: job.job_id, status: 'ok', attempt, seconds: 0 });
        await messages.remove(d);
        counts.skipped++;
        o.log(`job ${job.job_id} skipped: its result is already stored`);
        return undefined;
      }
    } catch (e) {
      if (!(e instanceof CloudError)) throw e;
      // Reading the ledger or the result failed in AWS, not in the job: handed back, not an attempt.
      o.log(`job ${job.job_id}: ${errorMessage(e)}; handed back`);
      await messages.handBack([d], 'stopping');
      return undefined;
    }
    if (attempt > maxAttempts) {
      // Its earlier deliveries ended with no report (the worker died, or froze past the visibility).
      const silent = attempt - 1 - m.history.length;
      const reason =
        m.history.length > 0
          ? `${m.history[m.history.length - 1]!.error}${silent > 0 ? ` (and ${silent} attempt(s) ended without a report: the worker died or froze past the visibility timeout)` : ''}`
          : `no worker reported why: ${attempt - 1} attempt(s) ended without a report (the worker died, or froze past the visibility timeout)`;
      await messages.deadLetter(d, reason, attempt - 1, m.history);
      return undefined;
    }
    try {
      const work = await handler.resolve(job);
      o.log(`job ${job.job_id} started: ${handler.describe(job)} (attempt ${attempt} of ${maxAttempts})`);
      const lease = new Lease({ queue, receiptHandle: d.receiptHandle, jobId: job.job_id, visibilitySeconds: config.fleet.visibility_timeout, capSeconds: config.fleet.heartbeat_cap, log: o.log }).start();
      return { ...(work as object), job, delivery: d, startedAt, lease } as Item;
    } catch (e) {
      // The settings are pinned: a job that does not resolve here does not resolve anywhere.
      await messages.failAttempt(d, errorMessage(e), seconds({ startedAt }), { retryable: !(e instanceof ConfigError) });
      return undefined;
    }
  };

  /** A finished sample: stored and reported, or (no result this attempt) offered again. */
  const finish = async (item: Item, result: EvalSample, end: SampleEnd, reason?: string): Promise<void> => {
    const { job, delivery: d } = item;
    item.lease.stop();
    if (item.requeued) return;
    try {
      if (session.signal.aborted && result.error) {
        await messages.handBack([d], 'stopping', seconds(item));
        return;
      }
      if (end === 'no-result') {
        await messages.failAttempt(d, reason ?? result.error?.message ?? 'the attempt produced no result', seconds(item));
        return;
      }
      const put = await store.putResult(job.job_id, await handler.resultLog(item, result));
      // An error result is marked, so a rerun finds what to retry without reading every result.
      const error = handler.errorOf(result);
      if (put.stored && error !== undefined) await store.putErrorMarker({ job_id: job.job_id, kind: 'sample', error });
      await messages.report({ job_id: job.job_id, status: 'ok', attempt: messages.attemptOf(d), seconds: seconds(item) });
      await messages.remove(d);
      counts.ok++;
      if (!put.stored) o.log(`job ${job.job_id}: another worker stored its result first; this attempt's result was not kept`);
      else o.log(`job ${job.job_id} ok in ${seconds(item)}s${error !== undefined ? ` (sample error: ${error})` : ''}`);
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
    await Promise.all(items.map((item) => messages.handBack([item.delivery], 'spot', seconds(item))));
    session.stop();
  }

  // The controller that started this worker is gone (local workers): stop as on a first signal.
  const parentGone = () => {
    o.log('the controller that started this worker is gone: handing back its jobs and stopping');
    session.stop();
  };
  o.parentGone?.addEventListener('abort', parentGone, { once: true });

  await messages.reportConcurrency({ from: o.concurrency ?? manifest.samples_per_worker, to: concurrency.current, reason: 'start', detail: concurrency.started });
  /** A change of the concurrency: logged, told to the controller, and the job source looks again. */
  const adapt = (change: ConcurrencyChange | undefined) => {
    if (!change) return;
    o.log(`concurrency ${change.from} -> ${change.to}: ${change.reason.replace(/_/g, ' ')} (${change.detail})`);
    void messages.reportConcurrency({ from: change.from, to: change.to, reason: change.reason, detail: change.detail });
    source.wake();
  };

  const source = new JobSource<Item>({
    queue,
    concurrency: () => concurrency.current,
    running: () => runningItems.size,
    pollSeconds: config.fleet.poll_seconds,
    idlePolls: config.fleet.idle_polls,
    idleMs: config.fleet.idle_minutes * 60_000,
    now: probes.now,
    stopped: () => session.signal.aborted || session.stopping.aborted,
    signal: session.signal,
    take,
    handBack: (ds) => messages.handBack(ds, preempted ? 'spot' : 'stopping'),
    log: o.log,
  });
  const pressureWatch = setInterval(() => adapt(concurrency.check()), PRESSURE_CHECK_MS);
  pressureWatch.unref();
  try {
    await handler.run({
      work: source,
      concurrency: slots,
      session,
      onStart: (item) => runningItems.add(item),
      onPhase: (item, phase) => {
        item.phase = phase;
      },
      onResult: async (item, sample, end, reason) => {
        const saturated = runningItems.size >= concurrency.current;
        try {
          await finish(item, sample, end, reason);
        } finally {
          runningItems.delete(item);
          // Samples cut short by a stop or a spot hand-back say nothing of the machine.
          if (end !== 'cancelled' && !item.requeued && !session.signal.aborted) adapt(concurrency.sampleEnded(sampleVerdict({ end, ...(reason !== undefined ? { reason } : {}), ...(item.phase !== undefined ? { phase: item.phase } : {}) }), saturated));
          source.wake();
        }
      },
    });
  } finally {
    clearInterval(pressureWatch);
    clearInterval(spotWatch);
    clearTimeout(handbackTimer);
    o.parentGone?.removeEventListener('abort', parentGone);
    removeHook();
    await session.close();
    await handler.close?.().catch(() => {});
    await rm(extraRoots.dir, { recursive: true, force: true }).catch(() => {});
  }
  let stop: WorkerStop = source.end === 'fleet-gone' ? 'fleet-gone' : source.end === 'idle' ? 'idle' : 'done';
  if (preempted) stop = 'preempted';
  else if (session.signal.aborted) stop = 'stopped';
  o.log(
    `worker ${o.workerName} stopped (${stop}): ${counts.ok} result(s), ${counts.skipped} already done, ${counts.failed} failed attempt(s), ${counts.dead} dead, ` +
      `${counts.released} handed back, ${counts.superseded} superseded, ${counts.rejected} refused message(s), ${counts.preempted} preempted`,
  );
  return { stopped: stop, exitCode: stop === 'stopped' ? session.stoppedExitCode : 0, jobs: counts };
}

/**
 * Why a parsed work message is not a job this worker may run, or undefined: it must be a job of
 * the manifest, as the manifest has it (`jobMismatch`), and carry only what ct writes into a work
 * message: fewer spent attempts than the fleet allows (a message with none left is dead-lettered
 * by the worker that spent the last), and no dead-letter record.
 */
function notRunnable(m: ParsedJobMessage, manifest: AnyManifest): string | undefined {
  const mismatch = jobMismatch(m, manifest);
  if (mismatch) return mismatch;
  if (m.attempts >= manifest.max_attempts) return `it claims ${m.attempts} attempt(s) spent, but the fleet allows ${manifest.max_attempts}`;
  if (m.dead) return 'a work message carrying a dead-letter record';
  return undefined;
}

/**
 * The manifest's extra-src trees, downloaded and unpacked as `<dir>/<name>/` (each an import root
 * for `module:export` policies and sandboxes, like PYTHONPATH=DIR).
 */
async function unpackExtraSrc(store: ResultStore, manifest: AnyManifest, log: (line: string) => void): Promise<{ dir: string; roots: string[] }> {
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
 * The fleet's manifest, and (when its work queue does not exist yet) a wait for it: up to
 * `waitForFleetSeconds` for a worker its controller started ahead of the setup, polling every
 * 250 ms; stopped early when the controller is gone.
 */
async function waitForFleet(o: WorkerOptions): Promise<AnyManifest | undefined> {
  const deadline = Date.now() + (o.waitForFleetSeconds ?? 0) * 1000;
  for (;;) {
    const waiting = Date.now() < deadline && !o.parentGone?.aborted;
    let manifest: AnyManifest | undefined;
    try {
      manifest = await o.store.getManifest();
    } catch (e) {
      // The bucket itself may not be there yet (the controller creates it first).
      if (!waiting || !(e instanceof CloudError && /NoSuchBucket/.test(`${e.code ?? ''} ${e.message}`))) throw e;
    }
    if (!waiting || (manifest && (await o.queue.exists()))) return manifest;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The handler of the manifest's kind of jobs, prepared (an eval fleet's settings, worker setup and policy). */
async function handlerFor(manifest: AnyManifest, o: WorkerOptions, extraSrcDir: string, importRoots: string[]): Promise<JobHandler<unknown>> {
  if (isMonitorManifest(manifest)) {
    const { monitorJobHandler } = await import('../control/monitor-job-handler.js');
    return (await monitorJobHandler({ manifest, store: o.store, config: o.config, cwd: o.cwd, importRoots, log: o.log })) as JobHandler<unknown>;
  }
  return (await evalJobHandler({ manifest, config: o.config, version: o.version, cwd: o.cwd, git: o.git, extraSrcDir, importRoots, log: o.log })) as JobHandler<unknown>;
}

export type { Manifest };

/**
 * A fleet's control plane at scale, simulated: the real controller (`runFleet`) against the
 * in-memory queue and store twins, with simulated workers on a simulated clock. Each worker
 * handles its messages as `ct fleet worker` does (fleet/worker.ts), through the same parts: a
 * `JobSource` receiving for free slots, `JobMessages` for reports, retries, dead letters and
 * hand-backs, a `Lease` keeping each running job's message invisible. Only the sample is
 * simulated: it takes a drawn time, then fails without a result, ends in error, or succeeds
 * (a real one-sample log is stored). Workers boot, some die at a random moment (their jobs come
 * back when their visibility passes), and the launcher tells the controller who is alive, as
 * EC2 does.
 *
 * Time is node:test's mocked timers and `Date`: the caller enables them (`mock.timers.enable({
 * apis: ['setTimeout', 'setInterval', 'Date'] })`) and `simulateFleet` advances the clock in steps
 * of `tickMs` whenever every promise that can settle has settled. Hours of fleet run in seconds;
 * what it costs in CPU and memory is this process's (controller, twins and workers together: an
 * upper bound on the controller's own).
 */
import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mock } from 'node:test';
import { seededRandom } from '../../src/control/metrics/intervals.js';
import { emptyFleetState, runFleet, type FleetResults, type RunFleetResult } from '../../src/fleet/controller.js';
import { FleetEventsLog } from '../../src/fleet/events-log.js';
import type { FleetProgress } from '../../src/fleet/fleet-progress.js';
import { JobMessages } from '../../src/fleet/job-messages.js';
import { JobSource } from '../../src/fleet/job-source.js';
import type { FleetLauncher } from '../../src/fleet/launcher.js';
import { Lease } from '../../src/fleet/lease.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { MemorySqs } from '../../src/fleet/memory-sqs.js';
import { deadJobSample, fleetLogHeader, oneSampleLog } from '../../src/fleet/one-sample-log.js';
import { PROTOCOL_VERSION, ticketIsCurrent, type Job, type Manifest, type ParsedJobMessage } from '../../src/fleet/protocol.js';
import type { Delivery } from '../../src/fleet/types.js';
import type { EvalSample } from '../../src/log/types.js';

export interface SimOptions {
  jobs: number;
  /** Workers at most (the run's --max-workers): an EC2 fleet grows up to it with its backlog. */
  workers: number;
  /** Workers of the first launch (default: as `ct run eval --fleet` launches EC2 workers, one wave: jobs / slots, at most `workers`). */
  firstLaunch?: number;
  /** fleet.scale_waves (default 2). */
  scaleWaves?: number;
  /** Samples each worker runs at once. */
  slots: number;
  /** A sample's time in seconds is drawn uniformly from this range... */
  sampleSeconds: [number, number];
  /** ...except this share of samples (stragglers), which take `stragglerSeconds`. */
  stragglerShare?: number;
  stragglerSeconds?: number;
  /** Share of attempts that end without a result (the sandbox would not start): retried. */
  attemptFailureShare?: number;
  /** Share of samples whose result is an error (the sample's own failure: a result, marked). */
  sampleErrorShare?: number;
  /** Share of jobs that fail every attempt: dead-lettered, their error result stored by the controller. */
  poisonShare?: number;
  /** Share of results whose done message is lost (stored, message deleted, never reported): the controller must find them in the bucket. */
  lostReportShare?: number;
  /** Share of workers that die (at a random moment of the expected run): 0.01 is 1%. */
  deathShare?: number;
  /** Seconds from a launch until the worker polls (an instance's boot). */
  bootSeconds?: number;
  maxAttempts?: number;
  visibilityTimeout?: number;
  pollSeconds?: number;
  checkSeconds?: number;
  idlePolls?: number;
  retryDelay?: number;
  /** Merge the results into one log at the end (costs what a merge costs; off: the control plane alone). */
  merge?: boolean;
  /** Simulated ms per step of the clock. */
  tickMs?: number;
  seed?: number;
  logDir?: string;
  /** Time the controller's own callbacks (async hooks: slows the whole run down). */
  timeController?: boolean;
  /** USD per worker-hour, for the cost the controller counts. */
  pricePerWorkerHour?: number;
}

export interface SimReport {
  end: RunFleetResult['end'];
  jobs: number;
  /** Jobs with exactly one stored result at the end. */
  results: number;
  /** Jobs without a result (lost). */
  lost: number;
  /** Results stored twice for one job (the store refuses a second: attempts of it counted here). */
  duplicatePuts: number;
  /** Samples that ran to the end more than once (a worker that died after finishing, a visibility that passed): work done twice, kept once. */
  rerun: number;
  dead: number;
  /** Jobs drawn to fail every attempt. */
  poisoned: number;
  /** Done messages the workers never sent. */
  lostReports: number;
  samplesRun: number;
  /** Simulated seconds from the first enqueue to the controller's end. */
  simulatedSeconds: number;
  /** Simulated seconds until the work queue first held nothing visible or delayed. */
  drainedAtSeconds: number;
  /** Busy share of slot-seconds of live workers until the queue drained. */
  utilisation: number;
  /** Last result minus the moment the queue drained, simulated seconds. */
  tailSeconds: number;
  launches: number;
  /** Of the launches: the first, replacements of dead workers, growth with the backlog (from the events). */
  launchedFirst: number;
  replaced: number;
  grown: number;
  deaths: number;
  instanceHours: number;
  /** This process's CPU seconds (controller, twins and workers). */
  cpuSeconds: number;
  /**
   * Seconds the controller's own code ran (every callback of its async context, timed: its calls
   * into the twins included, the way a real controller's SDK calls are its own), or undefined
   * when not measured.
   */
  controllerSeconds?: number;
  wallSeconds: number;
  maxRssMb: number;
  events: string;
  workerErrors: string[];
}

/**
 * A manifest of `n` epochs of one sample (`{env}:task`, job ids `{env}.task.e1`...), for fleets
 * whose workers are scripted or simulated.
 */
export function epochsManifest(
  fleetId: string,
  n: number,
  o: { env?: string; taskName?: string; slots?: number; maxAttempts?: number; failOnError?: boolean } = {},
): Manifest {
  const env = o.env ?? 'env';
  const jobs: Job[] = Array.from({ length: n }, (_, i) => ({ job_id: `${env}.task.e${i + 1}`, sample_id: `${env}:task`, setting: 'demo', env, main_task: 'task', epoch: i + 1 }));
  return {
    version: PROTOCOL_VERSION,
    fleet_id: fleetId,
    created: '2026-01-01T00:00:00.000Z',
    task_name: o.taskName ?? 'mem',
    epochs: n,
    policy: { name: 'test', args: {} },
    sample_options: { scorerTimeout: 1, setupTimeout: 1, sandboxAttempts: 1, tools: { bashTimeout: 1, modelOutputLimit: 100 }, failOnError: o.failOnError ?? true },
    samples_per_worker: o.slots ?? 2,
    max_attempts: o.maxAttempts ?? 3,
    settings: [],
    extra_src: [],
    sandbox: { spec: 'docker' },
    jobs,
  };
}

function sampleOf(j: Job, startedAt: number, seconds: number, error?: string): EvalSample {
  const started = new Date(startedAt).toISOString();
  const done = new Date(startedAt + seconds * 1000).toISOString();
  return {
    id: j.sample_id,
    epoch: j.epoch,
    input: 'x',
    target: '',
    messages: [],
    output: { model: 'none', choices: [], completion: '' },
    scores: { linux_scorer: { value: { main_task_success: error ? 'I' : 'C' }, history: [] } as never },
    metadata: {},
    store: {},
    events: [],
    model_usage: {},
    role_usage: {},
    started_at: started,
    completed_at: done,
    total_time: seconds,
    working_time: seconds,
    attachments: {},
    ...(error ? { error: { message: error, traceback: error, traceback_ansi: error } } : {}),
  } as EvalSample;
}

/** Runs a simulated fleet to its end; mocked timers must be enabled by the caller. */
export async function simulateFleet(o: SimOptions): Promise<SimReport> {
  const maxAttempts = o.maxAttempts ?? 3;
  const visibility = o.visibilityTimeout ?? 300;
  const pollSeconds = o.pollSeconds ?? 20;
  const idlePolls = o.idlePolls ?? 3;
  const retryDelay = o.retryDelay ?? 30;
  const bootSeconds = o.bootSeconds ?? 60;
  const tickMs = o.tickMs ?? 250;
  const random = seededRandom(o.seed ?? 1);
  const fleetId = `sim${o.jobs}`;
  const logDir = o.logDir ?? mkdtempSync(join(tmpdir(), 'ct-fleet-sim-'));
  const manifest = epochsManifest(fleetId, o.jobs, { env: 'sim', taskName: 'simulated', slots: o.slots, maxAttempts });
  const header = fleetLogHeader(manifest, 'sim');
  const sqs = new MemorySqs();
  const bucket = new MemoryBucket();
  const prefix = 'sim-';
  const queueFor = () => new MemoryJobQueue(sqs, fleetId, prefix);
  const storeFor = () => new MemoryResultStore(bucket, fleetId);

  // What each job is: drawn once, so a job's sample behaves the same on every attempt.
  const poison = new Set<string>();
  const plan = new Map<string, { seconds: number; error?: string }>();
  for (const j of manifest.jobs) {
    const straggler = random() < (o.stragglerShare ?? 0);
    const seconds = straggler ? (o.stragglerSeconds ?? o.sampleSeconds[1] * 3) : o.sampleSeconds[0] + random() * (o.sampleSeconds[1] - o.sampleSeconds[0]);
    if (random() < (o.poisonShare ?? 0)) poison.add(j.job_id);
    plan.set(j.job_id, { seconds, ...(random() < (o.sampleErrorShare ?? 0) ? { error: 'the scorer failed: simulated' } : {}) });
  }

  /** Work on real threads (zlib) under way: the clock waits for it, or simulated time would pass while it runs. */
  let realPending = 0;
  const real = async <T>(p: Promise<T>): Promise<T> => {
    realPending++;
    try {
      return await p;
    } finally {
      realPending--;
    }
  };
  const t0 = Date.now();
  let samplesRun = 0;
  let lostReports = 0;
  let duplicatePuts = 0;
  let lastResultAt = t0;
  let drainedAt: number | undefined;
  const finishedSamples = new Map<string, number>();
  /** Per worker: when it started polling, when it ended (or now), busy slot-ms, slots. */
  const ledger: Array<{ name: string; up?: number; down?: number; busy: Array<[number, number]> }> = [];
  let alive = 0;
  let launches = 0;
  let deaths = 0;
  // The expected run, for when deaths happen.
  const expectedSeconds = (o.jobs * ((o.sampleSeconds[0] + o.sampleSeconds[1]) / 2)) / (o.workers * o.slots);
  // Which launches die: a share of the first `workers` (replacements live).
  const doomed = new Set<number>();
  for (let want = Math.round((o.deathShare ?? 0) * o.workers); doomed.size < Math.min(want, o.workers); ) doomed.add(1 + Math.floor(random() * o.workers));
  /** Errors a worker met that a real one would have logged and stopped on (none expected). */
  const workerErrors: string[] = [];

  const launcher: FleetLauncher & { stopAllWorkers(): void } = {
    kind: 'ec2',
    async start(n: number) {
      for (let i = 0; i < n; i++) {
        launches++;
        startWorker(`sim-${launches}`, doomed.has(launches));
      }
      return n;
    },
    async alive() {
      return alive;
    },
    async stopAll() {
      launcher.stopAllWorkers();
    },
    stopAllWorkers() {
      for (const s of stops) s.abort();
    },
    names: () => ledger.map((w) => w.name),
    workerCommand: () => 'ct fleet worker (simulated)',
  };
  const stops: AbortController[] = [];

  function startWorker(name: string, dies: boolean): void {
    const rec = { name, busy: [] as Array<[number, number]> } as (typeof ledger)[number];
    ledger.push(rec);
    alive++;
    const stop = new AbortController();
    stops.push(stop);
    // A doomed worker dies at a random moment of the expected run (an instance lost).
    const dieAfterMs = dies ? bootSeconds * 1000 + random() * expectedSeconds * 1000 : undefined;
    setTimeout(() => {
      void runSimWorker(name, rec, stop, dieAfterMs)
        .catch((e: Error) => {
          // Once the controller is done its queues are gone: a worker still handing back meets that, as real ones do.
          if (!finished) workerErrors.push(`${name}: ${e.message}`);
        })
        .finally(() => {
        rec.down ??= Date.now();
        alive--;
      });
    }, bootSeconds * 1000);
  }

  async function runSimWorker(name: string, rec: (typeof ledger)[number], stop: AbortController, dieAfterMs: number | undefined): Promise<void> {
    const queue = queueFor();
    const store = storeFor();
    rec.up = Date.now();
    const log = process.env.CT_SIM_DEBUG ? (line: string) => console.error(`${new Date().toISOString()} ${name}: ${line}`) : () => {};
    const messages = new JobMessages({ queue, fleetId, workerName: name, maxAttempts, retryDelay, log });
    const running = new Set<Promise<void>>();
    let dead = false;
    const deathTimer = dieAfterMs !== undefined ? setTimeout(() => {
      dead = true;
      deaths++;
      rec.down = Date.now();
      stop.abort();
    }, dieAfterMs - bootSeconds * 1000) : undefined;

    type Item = { d: Delivery<ParsedJobMessage>; job: Job; lease: Lease; startedAt: number };
    const take = async (d: Delivery<ParsedJobMessage>): Promise<Item | undefined> => {
      messages.hold(d);
      if (!d.message) {
        await messages.reject(d, d.problem ?? 'unreadable');
        return undefined;
      }
      const job = d.message.job as Job;
      const attempt = messages.attemptOf(d);
      const ledgerNow = await store.getLedger();
      if (!ticketIsCurrent(ledgerNow, job.job_id, d.message.ticket)) {
        await messages.remove(d);
        await messages.report({ job_id: job.job_id, status: 'superseded', attempt, seconds: 0 });
        return undefined;
      }
      if (await store.hasResult(job.job_id)) {
        await messages.report({ job_id: job.job_id, status: 'ok', attempt, seconds: 0 });
        await messages.remove(d);
        return undefined;
      }
      if (attempt > maxAttempts) {
        await messages.deadLetter(d, d.message.history.at(-1)?.error ?? 'no worker reported why', attempt - 1, d.message.history);
        return undefined;
      }
      const lease = new Lease({ queue, receiptHandle: d.receiptHandle, jobId: job.job_id, visibilitySeconds: visibility, capSeconds: 6 * 3600, log }).start();
      return { d, job, lease, startedAt: Date.now() };
    };

    const runItem = async (item: Item): Promise<void> => {
      const p = plan.get(item.job.job_id)!;
      const failsNow = poison.has(item.job.job_id) || random() < (o.attemptFailureShare ?? 0);
      // A failed start ends early; a sample runs its time.
      const ms = failsNow ? Math.min(p.seconds, 5) * 1000 : p.seconds * 1000;
      const ended = await new Promise<boolean>((resolve) => {
        const cancel = () => {
          clearTimeout(t);
          resolve(false);
        };
        const t = setTimeout(() => {
          stop.signal.removeEventListener('abort', cancel);
          resolve(true);
        }, ms);
        stop.signal.addEventListener('abort', cancel, { once: true });
      });
      item.lease.stop();
      const secs = (Date.now() - item.startedAt) / 1000;
      rec.busy.push([item.startedAt, Date.now()]);
      if (!ended) {
        // A dead worker does nothing more: its message shows again when its visibility passes.
        if (!dead) await messages.handBack([item.d], 'stopping', secs);
        return;
      }
      samplesRun++;
      if (failsNow) {
        await messages.failAttempt(item.d, 'the sandbox would not start (simulated)', secs);
        return;
      }
      finishedSamples.set(item.job.job_id, (finishedSamples.get(item.job.job_id) ?? 0) + 1);
      // Without the merge nothing reads a result (the controller only sees that it is stored): a
      // stand-in spares writing 100,000 logs; with it, each is a real one-sample log.
      const body = o.merge ? await real(oneSampleLog(sampleOf(item.job, item.startedAt, p.seconds, p.error), header)) : Buffer.from(`simulated result of ${item.job.job_id}`);
      const put = await store.putResult(item.job.job_id, body);
      if (!put.stored) duplicatePuts++;
      else lastResultAt = Date.now();
      if (put.stored && p.error) await store.putErrorMarker({ job_id: item.job.job_id, kind: 'sample', error: p.error });
      if (random() >= (o.lostReportShare ?? 0)) await messages.report({ job_id: item.job.job_id, status: 'ok', attempt: messages.attemptOf(item.d), seconds: secs });
      else lostReports++;
      await messages.remove(item.d);
    };

    const source = new JobSource<Item>({
      queue,
      concurrency: o.slots,
      running: () => running.size,
      pollSeconds,
      idlePolls,
      stopped: () => stop.signal.aborted,
      signal: stop.signal,
      take,
      handBack: (ds) => (dead ? Promise.resolve() : messages.handBack(ds, 'stopping')),
      log,
    });
    try {
      for (;;) {
        while (running.size >= o.slots) await Promise.race(running);
        const next = await source.next();
        if (next.done) break;
        const p: Promise<void> = runItem(next.value).finally(() => running.delete(p));
        running.add(p);
      }
      await Promise.all(running);
      log(`worker ended: ${source.end}`);
    } finally {
      clearTimeout(deathTimer);
    }
  }

  const events = new FleetEventsLog(logDir, fleetId);
  const quiet: FleetProgress = { update() {}, note() {}, stop() {} };
  const noMerge: FleetResults = {
    deadResult: (d) => real(oneSampleLog(deadJobSample(d), header)),
    merge: async () => ({ path: '', status: 'success', header: {} as never, rows: [], missing: [] }),
  };
  const controller = new AbortController();
  // The controller's time: every callback that runs in its async context, timed.
  const context = new AsyncLocalStorage<'controller'>();
  let controllerMs = 0;
  const started: number[] = [];
  const hook = o.timeController
    ? createHook({
        before() {
          started.push(context.getStore() === 'controller' ? cpuMicros() : -1);
        },
        after() {
          const t = started.pop();
          if (t !== undefined && t >= 0) controllerMs += (cpuMicros() - t) / 1000;
        },
      }).enable()
    : undefined;
  const cpu0 = process.cpuUsage();
  const wall0 = performance.now();
  let finished = false;
  const syncStart = cpuMicros();
  const run = context.run('controller', () => runFleet({
    queue: queueFor(),
    store: storeFor(),
    manifest,
    ...(o.merge ? {} : { results: noMerge }),
    state: emptyFleetState(),
    launcher,
    workers: o.firstLaunch ?? Math.min(o.workers, Math.ceil(o.jobs / o.slots)),
    scale: { maxWorkers: o.workers, waves: o.scaleWaves ?? 2 },
    timings: {
      visibilityTimeout: visibility,
      maxAttempts,
      pollSeconds,
      checkSeconds: o.checkSeconds ?? 30,
      staleWarningMinutes: 30,
      staleTeardownMinutes: 120,
    },
    logDir,
    version: 'sim',
    events,
    progress: quiet,
    pricePerWorkerHour: o.pricePerWorkerHour ?? 0,
    resumeCommand: 'ct run eval --fleet (simulated)',
    signal: controller.signal,
  })).finally(() => (finished = true));
  if (hook) controllerMs += (cpuMicros() - syncStart) / 1000;

  const probe = queueFor();
  for (let step = 0; !finished; step++) {
    do await new Promise((r) => setImmediate(r));
    while (realPending > 0);
    if (finished) break;
    if (drainedAt === undefined && step % 20 === 0 && (await probe.exists())) {
      const d = (await probe.depth()).work;
      if (d.visible + d.delayed === 0 && finishedSamples.size > 0) drainedAt = Date.now();
    }
    mock.timers.tick(tickMs);
  }
  const result = await run;
  hook?.disable();
  launcher.stopAllWorkers();
  const cpu = process.cpuUsage(cpu0);
  const end = Date.now();
  drainedAt ??= end;

  // Utilisation until the queue drained: busy slot-ms over slot-ms of workers up then.
  let busy = 0;
  let capacity = 0;
  for (const w of ledger) {
    if (w.up === undefined || w.up >= drainedAt) continue;
    capacity += (Math.min(w.down ?? drainedAt, drainedAt) - w.up) * o.slots;
    for (const [a, b] of w.busy) busy += Math.max(0, Math.min(b, drainedAt) - Math.max(a, w.up));
  }
  let instanceMs = 0;
  for (const w of ledger) if (w.up !== undefined) instanceMs += (w.down ?? end) - w.up + bootSeconds * 1000;

  const events_ = readFileSync(events.path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; workers?: unknown });
  const launchedBy = (kind: string) => events_.filter((e) => e.event === kind).reduce((n, e) => n + (Array.isArray(e.workers) ? e.workers.length : 0), 0);
  let results = 0;
  for (const j of manifest.jobs) if (bucket.objects.has(`${fleetId}/${j.job_id}.eval`)) results++;
  let rerun = 0;
  for (const n of finishedSamples.values()) rerun += n - 1;
  return {
    end: result.end,
    jobs: o.jobs,
    results,
    lost: o.jobs - results,
    duplicatePuts,
    rerun,
    dead: result.dead.length,
    poisoned: poison.size,
    lostReports,
    samplesRun,
    simulatedSeconds: (end - t0) / 1000,
    drainedAtSeconds: (drainedAt - t0) / 1000,
    utilisation: capacity > 0 ? busy / capacity : 0,
    tailSeconds: Math.max(0, (lastResultAt - drainedAt) / 1000),
    launches,
    launchedFirst: launchedBy('launch'),
    replaced: launchedBy('replace'),
    grown: launchedBy('scale'),
    deaths,
    instanceHours: instanceMs / 3_600_000,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    ...(hook ? { controllerSeconds: controllerMs / 1000 } : {}),
    wallSeconds: (performance.now() - wall0) / 1000,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
    events: events.path,
    workerErrors,
  };
}

/** This process's CPU so far, µs. */
function cpuMicros(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

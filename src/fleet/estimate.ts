import { instancePrice, type InstancePrice } from '../cloud/prices.js';
import type { Config } from '../config/config.js';

/**
 * The estimate shown before a fleet starts (and alone with `--estimate`): jobs left, workers,
 * wall time and cost.
 *
 * Wall time is `waves` x `seconds_per_sample` (a guess the user can set; default 300 s), where a
 * wave is every worker running its `perWorker` samples at once: waves = ceil(remaining / (workers
 * x perWorker)). An EC2 worker is also paid for around its samples (`overhead`): its boot, from
 * launch until it takes its first job (fleet.estimate_boot_seconds), and its tail: the empty polls
 * before it stops once no job is left (fleet.idle_polls x fleet.poll_seconds; fewer when the
 * controller deletes the queues first), then its log upload and shutdown
 * (fleet.estimate_shutdown_seconds). Every worker stays up until the fleet's last job ends (a
 * worker keeps polling while another still runs jobs), so each one is paid for the whole wall
 * time: instance-hours = workers x wall time. Cost is that times the price per worker-hour (0 for
 * `local:` and `external` workers, which run on machines ct does not pay for and have no overhead
 * here).
 *
 * EC2 fleets start with the workers the backlog needs for one wave (at most --max-workers) and
 * grow while busy workers cannot finish the queue in fleet.scale_waves waves (scaling.ts): the
 * estimate is that first launch; `maxWorkers` says how far the fleet may grow (workers that slow
 * down or die are replaced up to it). Workers that adapt their concurrency start at `perWorker`.
 * A resumed fleet also shows what its earlier runs launched and ran (`soFar`, from its events log).
 */
export interface FleetEstimate {
  fleetId: string;
  jobs: number;
  done: number;
  remaining: number;
  workers: number;
  perWorker: number;
  /** Rounds of every worker running `perWorker` samples at once. */
  waves: number;
  secondsPerSample: number;
  /** Seconds each worker is paid for before its first job (0 for free workers). */
  bootSeconds: number;
  /** Seconds each worker polls an empty queue before it stops (0 for free workers). */
  idleSeconds: number;
  /** Seconds from a worker's exit to its instance's end (0 for free workers). */
  shutdownSeconds: number;
  /** Estimated wall time, seconds: boot + waves x seconds per sample + idle + shutdown. */
  seconds: number;
  /** USD. */
  cost: number;
  pricePerWorkerHour: number;
  /** Worker instance-hours the estimate pays for (workers x wall time). */
  instanceHours: number;
  /** Where the price comes from (price table and its date, config, --price); absent for free workers. */
  priceSource?: string;
  /** EC2: live workers the fleet may grow to as the backlog needs (--max-workers). */
  maxWorkers?: number;
  /** Workers adapt their samples at once from `perWorker`, up to this (fleet.max_concurrency); absent: fixed. */
  adaptiveCeiling?: number;
  /** What earlier runs of this fleet launched and ran (its events log), absent for a new fleet. */
  soFar?: { launched: number; workerHours: number; cost: number };
}

/**
 * What one EC2 worker-hour costs: `--price` / `fleet.price_per_hour`, else config `fleet.prices`,
 * else the price table (data/ec2-prices.json), spot as its typical fraction of on demand. An
 * instance type none of them knows is a ConfigError (exit 2), raised before anything is created.
 */
export function ec2WorkerPrice(
  fleet: Pick<Config['fleet'], 'prices' | 'price_per_hour'>,
  o: { instanceType: string; region: string; spot: boolean; pricePerHour?: number },
): InstancePrice {
  const pricePerHour = o.pricePerHour ?? fleet.price_per_hour;
  return instancePrice(o.instanceType, { region: o.region, spot: o.spot, prices: fleet.prices, ...(pricePerHour !== undefined ? { pricePerHour } : {}) });
}

/** What an EC2 worker is paid for besides its samples (see FleetEstimate). */
export interface WorkerOverhead {
  bootSeconds: number;
  idleSeconds: number;
  shutdownSeconds: number;
}

/** An EC2 worker's paid time around its samples, from the config (see FleetEstimate). */
export function ec2WorkerOverhead(fleet: Pick<Config['fleet'], 'estimate_boot_seconds' | 'estimate_shutdown_seconds' | 'idle_polls' | 'poll_seconds'>): WorkerOverhead {
  return { bootSeconds: fleet.estimate_boot_seconds, idleSeconds: fleet.idle_polls * fleet.poll_seconds, shutdownSeconds: fleet.estimate_shutdown_seconds };
}

export function estimateFleet(o: {
  fleetId: string;
  jobs: number;
  done: number;
  workers: number;
  perWorker: number;
  secondsPerSample: number;
  /** EC2 workers' boot and tail (ec2WorkerOverhead); absent for workers ct does not pay for. */
  overhead?: WorkerOverhead;
  pricePerWorkerHour: number;
  priceSource?: string;
  maxWorkers?: number;
  adaptiveCeiling?: number;
  /** Earlier runs of this fleet (readFleetUsage). */
  soFar?: { launched: number; workerHours: number };
}): FleetEstimate {
  const remaining = Math.max(0, o.jobs - o.done);
  const workers = remaining === 0 ? 0 : o.workers;
  const waves = workers === 0 ? 0 : Math.ceil(remaining / (workers * o.perWorker));
  const paid = workers > 0 && o.overhead ? o.overhead : { bootSeconds: 0, idleSeconds: 0, shutdownSeconds: 0 };
  const seconds = paid.bootSeconds + waves * o.secondsPerSample + paid.idleSeconds + paid.shutdownSeconds;
  const instanceHours = (workers * seconds) / 3600;
  const cost = instanceHours * o.pricePerWorkerHour;
  return {
    fleetId: o.fleetId,
    jobs: o.jobs,
    done: o.done,
    remaining,
    workers,
    perWorker: o.perWorker,
    waves,
    secondsPerSample: o.secondsPerSample,
    bootSeconds: paid.bootSeconds,
    idleSeconds: paid.idleSeconds,
    shutdownSeconds: paid.shutdownSeconds,
    seconds,
    cost,
    pricePerWorkerHour: o.pricePerWorkerHour,
    instanceHours,
    ...(o.priceSource ? { priceSource: o.priceSource } : {}),
    ...(o.maxWorkers !== undefined && o.maxWorkers > workers && workers > 0 ? { maxWorkers: o.maxWorkers } : {}),
    ...(o.adaptiveCeiling !== undefined && o.adaptiveCeiling > o.perWorker ? { adaptiveCeiling: o.adaptiveCeiling } : {}),
    ...(o.soFar ? { soFar: { ...o.soFar, cost: o.soFar.workerHours * o.pricePerWorkerHour } } : {}),
  };
}

export function formatEstimate(e: FleetEstimate, workersLabel: string): string {
  const mins = Math.ceil(e.seconds / 60);
  const lines = [
    `fleet ${e.fleetId}: ${e.jobs} job(s), ${e.done} already finished, ${e.remaining} to run`,
    `workers: ${e.workers} (${workersLabel})${e.maxWorkers ? `, growing up to ${e.maxWorkers} as the backlog needs (fleet.scale_waves)` : ''}, ` +
      `${e.perWorker} sample(s) at once each${e.adaptiveCeiling ? ` to start, adapting to each machine up to ${e.adaptiveCeiling} (fleet.max_concurrency)` : ''}`,
    `estimated time: ~${mins} min; estimated cost: $${e.cost.toFixed(2)}` +
      (e.pricePerWorkerHour === 0
        ? ' (workers on your own machines)'
        : ` (${e.instanceHours.toFixed(1)} instance-hours at $${e.pricePerWorkerHour}/worker-hour${e.priceSource ? `; ${e.priceSource}` : ''})`),
  ];
  if (e.soFar) {
    lines.push(
      `so far: ${e.soFar.launched} worker(s) launched, ${e.soFar.workerHours.toFixed(1)} ${e.pricePerWorkerHour === 0 ? 'worker' : 'instance'}-hours` +
        (e.pricePerWorkerHour === 0 ? '' : `, $${e.soFar.cost.toFixed(2)}`) +
        ' (earlier runs of this fleet)',
    );
  }
  if (e.waves > 0) {
    // How the time is made up, and the settings that change it.
    const parts = [`${e.waves} wave(s) x ~${duration(e.secondsPerSample)} a sample (fleet.estimate_seconds_per_sample)`];
    const overhead = e.bootSeconds + e.idleSeconds + e.shutdownSeconds > 0;
    if (overhead) {
      parts.unshift(`~${duration(e.bootSeconds)} boot (fleet.estimate_boot_seconds)`);
      parts.push(`~${duration(e.idleSeconds)} of empty polls (fleet.idle_polls x fleet.poll_seconds)`, `~${duration(e.shutdownSeconds)} shutdown (fleet.estimate_shutdown_seconds)`);
    }
    lines.push(`  ${overhead ? 'each worker: ' : ''}${parts.join(' + ')}`);
  }
  return lines.join('\n');
}

/** The estimate for `--estimate --json` (snake_case, as ct's other JSON output). */
export function estimateJson(e: FleetEstimate): Record<string, unknown> {
  return {
    fleet_id: e.fleetId,
    jobs: e.jobs,
    done: e.done,
    remaining: e.remaining,
    workers: e.workers,
    per_worker: e.perWorker,
    waves: e.waves,
    seconds_per_sample: e.secondsPerSample,
    boot_seconds: e.bootSeconds,
    idle_seconds: e.idleSeconds,
    shutdown_seconds: e.shutdownSeconds,
    seconds: e.seconds,
    instance_hours: e.instanceHours,
    price_per_worker_hour: e.pricePerWorkerHour,
    cost: e.cost,
    ...(e.priceSource ? { price_source: e.priceSource } : {}),
    ...(e.maxWorkers !== undefined ? { max_workers: e.maxWorkers } : {}),
    ...(e.adaptiveCeiling !== undefined ? { max_concurrency: e.adaptiveCeiling } : {}),
    ...(e.soFar ? { launched_so_far: e.soFar.launched, instance_hours_so_far: e.soFar.workerHours, cost_so_far: e.soFar.cost } : {}),
  };
}

/** Seconds as a short duration: "45 s" under 2 minutes, else whole minutes. */
function duration(seconds: number): string {
  return seconds < 120 ? `${Math.round(seconds)} s` : `${Math.round(seconds / 60)} min`;
}

import { instancePrice, type InstancePrice } from '../cloud/prices.js';
import type { Config } from '../config/config.js';

/**
 * The estimate shown before a fleet starts (and alone with `--estimate`): jobs left, workers,
 * wall time and cost. Wall time assumes `seconds_per_sample` a sample (a guess the user can set;
 * default 300 s); cost is worker-hours times the launcher's price per worker-hour (0 for
 * `local:` and `external` workers, which run on machines ct does not pay for).
 */
export interface FleetEstimate {
  fleetId: string;
  jobs: number;
  done: number;
  remaining: number;
  workers: number;
  perWorker: number;
  /** Estimated wall time, seconds. */
  seconds: number;
  /** USD. */
  cost: number;
  pricePerWorkerHour: number;
  /** Worker instance-hours the estimate pays for (workers x wall time). */
  instanceHours: number;
  /** Where the price comes from (price table and its date, config, --price); absent for free workers. */
  priceSource?: string;
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

export function estimateFleet(o: {
  fleetId: string;
  jobs: number;
  done: number;
  workers: number;
  perWorker: number;
  secondsPerSample: number;
  pricePerWorkerHour: number;
  priceSource?: string;
}): FleetEstimate {
  const remaining = Math.max(0, o.jobs - o.done);
  const workers = remaining === 0 ? 0 : o.workers;
  const waves = workers === 0 ? 0 : Math.ceil(remaining / (workers * o.perWorker));
  const seconds = waves * o.secondsPerSample;
  const instanceHours = (workers * seconds) / 3600;
  const cost = instanceHours * o.pricePerWorkerHour;
  return {
    fleetId: o.fleetId,
    jobs: o.jobs,
    done: o.done,
    remaining,
    workers,
    perWorker: o.perWorker,
    seconds,
    cost,
    pricePerWorkerHour: o.pricePerWorkerHour,
    instanceHours,
    ...(o.priceSource ? { priceSource: o.priceSource } : {}),
  };
}

export function formatEstimate(e: FleetEstimate, workersLabel: string): string {
  const mins = Math.ceil(e.seconds / 60);
  return [
    `fleet ${e.fleetId}: ${e.jobs} job(s), ${e.done} already finished, ${e.remaining} to run`,
    `workers: ${e.workers} (${workersLabel}), ${e.perWorker} sample(s) at once each`,
    `estimated time: ~${mins} min; estimated cost: $${e.cost.toFixed(2)}` +
      (e.pricePerWorkerHour === 0
        ? ' (workers on your own machines)'
        : ` (${e.instanceHours.toFixed(1)} instance-hours at $${e.pricePerWorkerHour}/worker-hour${e.priceSource ? `; ${e.priceSource}` : ''})`),
  ].join('\n');
}

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
}

export function estimateFleet(o: {
  fleetId: string;
  jobs: number;
  done: number;
  workers: number;
  perWorker: number;
  secondsPerSample: number;
  pricePerWorkerHour: number;
}): FleetEstimate {
  const remaining = Math.max(0, o.jobs - o.done);
  const workers = remaining === 0 ? 0 : o.workers;
  const waves = workers === 0 ? 0 : Math.ceil(remaining / (workers * o.perWorker));
  const seconds = waves * o.secondsPerSample;
  const cost = (workers * seconds * o.pricePerWorkerHour) / 3600;
  return { fleetId: o.fleetId, jobs: o.jobs, done: o.done, remaining, workers, perWorker: o.perWorker, seconds, cost, pricePerWorkerHour: o.pricePerWorkerHour };
}

export function formatEstimate(e: FleetEstimate, workersLabel: string): string {
  const mins = Math.ceil(e.seconds / 60);
  return [
    `fleet ${e.fleetId}: ${e.jobs} job(s), ${e.done} already finished, ${e.remaining} to run`,
    `workers: ${e.workers} (${workersLabel}), ${e.perWorker} sample(s) at once each`,
    `estimated time: ~${mins} min; estimated cost: $${e.cost.toFixed(2)}` + (e.pricePerWorkerHour === 0 ? ' (workers on your own machines)' : ` at $${e.pricePerWorkerHour}/worker-hour`),
  ].join('\n');
}

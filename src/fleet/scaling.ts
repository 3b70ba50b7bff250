/**
 * When an EC2 fleet grows. The first launch is what the backlog needs for one wave (every job
 * taken at once, at most --max-workers); afterwards the controller's periodic check asks
 * `scaleUp` whether to launch more: only when
 *
 *   - the queued jobs (visible messages) are more than the live workers finish in
 *     `fleet.scale_waves` waves (a wave: every slot of every live worker runs one job), and
 *   - the live workers are busy: jobs in flight fill at least BUSY_FRACTION of their slots, so a
 *     worker still booting (live, not yet taking jobs) holds growth back until it takes its share,
 *
 * it launches enough workers for what is left (queued + in flight) to finish in that many waves,
 * at most --max-workers live in all and within the launch budget. A dead worker is not live
 * (the launcher counts only running ones), so it never holds growth back; the messages it held
 * count as in flight until their visibility passes, which only makes the fleet look busier.
 * Pure, so the rule is tested apart from any queue or launcher.
 */

/** The share of the live workers' slots that must hold a job for the fleet to count as busy (0.9). */
export const BUSY_FRACTION = 0.9;

export interface ScaleInput {
  /** Jobs waiting on the work queue (visible messages). */
  backlog: number;
  /** Jobs taken by workers (in-flight messages). */
  inFlight: number;
  /** Workers running now (dead ones not counted). */
  liveWorkers: number;
  /** Samples each worker runs at once (the workers' latest reported concurrency, else the fleet's). */
  slotsPerWorker: number;
  /** fleet.scale_waves. */
  waves: number;
  /** --max-workers / fleet.max_workers: live workers at most. */
  maxWorkers: number;
  /** Launches the budget still allows (Infinity: no limit). */
  budgetLeft: number;
}

export interface ScaleDecision {
  /** Workers to launch now (0: none). */
  launch: number;
  /** Why, in one line (for the event and the progress note). */
  reason: string;
}

/** How many workers to launch now, and why (see above). */
export function scaleUp(i: ScaleInput): ScaleDecision {
  const slots = Math.max(1, i.slotsPerWorker);
  const capacity = i.liveWorkers * slots;
  const perWaves = capacity * i.waves;
  if (i.backlog === 0) return { launch: 0, reason: 'no job is waiting' };
  if (i.backlog <= perWaves) return { launch: 0, reason: `${i.backlog} queued job(s) fit in ${i.waves} wave(s) of ${i.liveWorkers} worker(s) x ${slots} slot(s)` };
  if (i.liveWorkers > 0 && i.inFlight < Math.floor(capacity * BUSY_FRACTION)) {
    return { launch: 0, reason: `the workers are not all busy (${i.inFlight} of ${capacity} slot(s) hold a job)` };
  }
  if (i.liveWorkers >= i.maxWorkers) return { launch: 0, reason: `${i.liveWorkers} worker(s) live: at --max-workers ${i.maxWorkers}` };
  if (i.budgetLeft <= 0) return { launch: 0, reason: 'the launch budget is spent' };
  const target = Math.ceil((i.backlog + i.inFlight) / (slots * i.waves));
  const launch = Math.max(1, Math.min(target - i.liveWorkers, i.maxWorkers - i.liveWorkers, i.budgetLeft));
  return {
    launch,
    reason:
      `${i.backlog} job(s) queued, more than ${i.liveWorkers} busy worker(s) x ${slots} slot(s) finish in ${i.waves} wave(s)` +
      `; ${i.liveWorkers + launch} worker(s) for ${i.backlog + i.inFlight} left (at most ${i.maxWorkers})`,
  };
}

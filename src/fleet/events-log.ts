/**
 * A fleet's event log: one JSON line per event (launch, job done / failed / dead-lettered /
 * requeued, warnings, merge, teardown) appended to `<log_dir>/fleet/<fleet_id>/events.jsonl`.
 * Appended, never rewritten, so a resumed controller adds to the record of the one before it.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { redactSecrets } from '../config/secret-registry.js';

/** Kinds of events; each line has `time`, `event` and the event's own fields. */
export type FleetEventKind =
  | 'start'
  | 'resume'
  | 'enqueue'
  | 'launch'
  | 'replace'
  // EC2 workers launched because the backlog outgrew the live ones: {workers, from, to, backlog, in_flight, reason}.
  | 'scale'
  // A worker's samples at once changed (or started): {worker, from, to, reason, detail}.
  | 'concurrency'
  | 'job_done'
  | 'job_failed'
  | 'job_requeued'
  | 'job_dead'
  // A job queued again by its worker (stopping, spot notice) as a fresh message: no attempt spent.
  | 'handed_back'
  // A message of an earlier generation, dropped unrun by a worker.
  | 'superseded'
  // Error results a rerun queues again (--no-retry-errors keeps them).
  | 'retry'
  | 'rejected_message'
  | 'warning'
  | 'stopped'
  | 'merge'
  | 'teardown'
  // SSM parameter names only, never values.
  | 'secrets_stored'
  | 'secrets_deleted';

export class FleetEventsLog {
  readonly path: string;

  constructor(logDir: string, fleetId: string) {
    this.path = join(logDir, 'fleet', fleetId, 'events.jsonl');
    mkdirSync(dirname(this.path), { recursive: true });
  }

  /**
   * Appends one event (synchronously, so a controller killed right after still has it), with
   * every registered secret redacted: a worker's error may quote a service's answer.
   */
  add(event: FleetEventKind, fields: Record<string, unknown> = {}): void {
    appendFileSync(this.path, `${redactSecrets(JSON.stringify({ time: new Date().toISOString(), event, ...fields }))}\n`);
  }
}

/** What earlier runs of a fleet used, as its events log records it. */
export interface FleetUsage {
  /** Workers started (`launch`, `replace` and `scale` events). */
  launched: number;
  /** Worker-hours (instance-hours on EC2) of the runs that ended (`stopped`, `teardown`); a killed controller's run is missing. */
  workerHours: number;
}

/** The usage recorded in `<log_dir>/fleet/<fleet_id>/events.jsonl`, or undefined when there is no record. */
export function readFleetUsage(logDir: string, fleetId: string): FleetUsage | undefined {
  const path = join(logDir, 'fleet', fleetId, 'events.jsonl');
  if (!existsSync(path)) return undefined;
  const usage: FleetUsage = { launched: 0, workerHours: 0 };
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    let e: { event?: string; workers?: unknown; worker_hours?: unknown };
    try {
      e = JSON.parse(line) as typeof e;
    } catch {
      continue; // a line cut short by a killed controller
    }
    if ((e.event === 'launch' || e.event === 'replace' || e.event === 'scale') && Array.isArray(e.workers)) usage.launched += e.workers.length;
    if ((e.event === 'stopped' || e.event === 'teardown') && typeof e.worker_hours === 'number') usage.workerHours += e.worker_hours;
  }
  return usage.launched > 0 ? usage : undefined;
}

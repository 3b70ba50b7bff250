/**
 * `ct cloud status`: the inventory narrowed to the caller's resources (or everyone's), as text
 * for people and as one JSON object for scripts.
 */
import { isLive, type CloudInstance, type FleetView, type Inventory } from './inventory.js';

export interface StatusReport {
  region: string;
  caller: string;
  allUsers: boolean;
  /** Fleets with a live worker, queues or secrets (a fleet of terminated workers and nothing else is history, not status). */
  fleets: Array<Omit<FleetView, 'instances'> & { workers: CloudInstance[] }>;
  sandboxes: CloudInstance[];
  amiBuilders: CloudInstance[];
  /** Fleets left out because nothing says who owns them (no live or recent instance, untagged queues); `--all-users` shows them. */
  unownedFleets: number;
}

/** The caller's part of the inventory (all of it with `allUsers`); only live instances are listed. */
export function statusReport(inv: Inventory, caller: string, allUsers: boolean): StatusReport {
  const mine = (i: CloudInstance) => allUsers || i.launchedBy === caller;
  let unowned = 0;
  const fleets: StatusReport['fleets'] = [];
  for (const f of inv.fleets) {
    const workers = f.instances.filter((i) => isLive(i) && mine(i));
    if (!allUsers && !f.owners.includes(caller)) {
      if (f.owners.length === 0) unowned++;
      continue;
    }
    if (workers.length === 0 && f.queues.length === 0 && f.secrets.length === 0) continue;
    const { instances: _all, ...rest } = f;
    fleets.push({ ...rest, workers, costSoFar: workers.reduce((s, i) => s + (i.costSoFar ?? 0), 0) });
  }
  return {
    region: inv.region,
    caller,
    allUsers,
    fleets,
    sandboxes: inv.sandboxes.filter((i) => isLive(i) && mine(i)),
    amiBuilders: inv.amiBuilders.filter((i) => isLive(i) && mine(i)),
    unownedFleets: unowned,
  };
}

export function formatStatus(r: StatusReport): string {
  const who = r.allUsers ? 'all users' : r.caller;
  const lines: string[] = [`ct resources in ${r.region} (${who})`];
  if (r.fleets.length === 0) lines.push('fleets: none');
  for (const f of r.fleets) {
    const results = f.jobs !== undefined ? `${f.results}/${f.jobs}` : `${f.results}`;
    const state = f.finished ? ' [finished]' : f.abandoned ? ` [abandoned: no progress for ${age(f.idleSeconds ?? 0)}, ${f.unfinished} job(s) without a result]` : '';
    lines.push(
      `fleet ${f.fleetId}${f.owners.length ? ` (${f.owners.join(', ')})` : ''}${state}: ` +
        `${f.workers.length} worker(s); queue ${f.counts.visible} visible / ${f.counts.inFlight} in flight / ${f.counts.dlq} DLQ; ` +
        `results ${results}; cost so far $${f.costSoFar.toFixed(2)}`,
    );
    for (const w of f.workers) lines.push(`  ${instanceLine(w, r.allUsers)}`);
    if (f.abandoned) lines.push(`  discard its queues and secrets (results kept): ct fleet discard ${f.fleetId}, or ct cloud cleanup --yes`);
  }
  lines.push(r.sandboxes.length ? 'sandboxes:' : 'sandboxes: none');
  for (const i of r.sandboxes) lines.push(`  ${instanceLine(i, r.allUsers)}`);
  lines.push(r.amiBuilders.length ? 'AMI builders:' : 'AMI builders: none');
  for (const i of r.amiBuilders) lines.push(`  ${instanceLine(i, r.allUsers)}`);
  if (r.unownedFleets) lines.push(`${r.unownedFleets} fleet(s) with no known owner not shown (--all-users shows them)`);
  return `${lines.join('\n')}\n`;
}

function instanceLine(i: CloudInstance, showOwner: boolean): string {
  const cost = i.costSoFar !== undefined ? ` $${i.costSoFar.toFixed(2)}` : '';
  return [i.id, i.type, i.spot ? 'spot' : 'on-demand', i.state, age(i.ageSeconds), i.name ?? '', showOwner ? (i.launchedBy ?? '?') : '']
    .filter(Boolean)
    .join('  ') + cost;
}

/** 42s, 17m, 3h05m, 2d04h. */
export function age(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, '0')}h`;
}

/**
 * `ct cloud cleanup`: what ct left behind in a region, and its removal. Leftovers are
 * - instances (ManagedBy=ct) of a finished fleet or of a fleet with no queues and no manifest,
 *   and any ct instance older than `fleet.instance_max_hours` (past every hard timeout; a sandbox
 *   kept with --keep-ec2-instance excepted);
 * - the queues and SSM secret parameters of finished fleets (results in S3 stay);
 * - the queues and SSM secret parameters of abandoned fleets (see inventory.ts), and with
 *   `deleteResults` every object under their `{fleet_id}/` in the bucket;
 * - security groups tagged ManagedBy=ct that no live instance uses once the above are gone.
 * Without `allUsers` only the caller's are judged: instances tagged LaunchedBy=caller, and fleets
 * owned by the caller (see inventory.ts). Resources without ManagedBy=ct are never listed.
 */
import { DeleteSecurityGroupCommand, DescribeInstancesCommand, TerminateInstancesCommand, type EC2Client } from '@aws-sdk/client-ec2';
import type { S3Client } from '@aws-sdk/client-s3';
import { DeleteQueueCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { DeleteParametersCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { awsErrorName, cloudError } from '../errors.js';
import { deleteFleetObjects } from '../fleet/delete-fleet-objects.js';
import { sleep } from '../host/backoff.js';
import { isLive, type CloudInstance, type FleetView, type Inventory } from './inventory.js';

export type LeftoverKind = 'instance' | 'queue' | 'parameter' | 'security-group' | 'results';

export interface Leftover {
  kind: LeftoverKind;
  /** Instance id, queue URL, parameter name, group id, or `s3://bucket/{fleet_id}/` for a fleet's results. */
  id: string;
  /** Shown to the user: name, fleet, owner. */
  label: string;
  reason: string;
  /** The fleet it belongs to (queues, parameters, results). */
  fleetId?: string;
}

/** SSM takes at most 10 names per DeleteParameters call; EC2 up to 1000 ids per TerminateInstances (we use 100). */
const PARAMETER_BATCH = 10;
const INSTANCE_BATCH = 100;

/** How long `--yes` waits for terminated instances to let go of their security groups (AWS: about a minute). */
const RELEASE_WAIT_MS = 180_000;
const RELEASE_POLL_MS = 5_000;

export interface CleanupOptions {
  caller: string;
  allUsers: boolean;
  /** fleet.instance_max_hours. */
  instanceMaxHours: number;
  /** Also remove abandoned fleets' results (every object under `{fleet_id}/` in `bucket`). */
  deleteResults: boolean;
  bucket: string;
}

/** The leftovers `caller` may remove (every user's with `allUsers`). */
export function planCleanup(inv: Inventory, o: CleanupOptions): Leftover[] {
  const mine = (i: CloudInstance) => o.allUsers || i.launchedBy === o.caller;
  const out: Leftover[] = [];
  const doomed = new Set<string>();
  const maxSeconds = o.instanceMaxHours * 3600;
  const instance = (i: CloudInstance, reason: string) => {
    doomed.add(i.id);
    out.push({ kind: 'instance', id: i.id, label: `${i.id} ${i.type} ${i.name ?? ''} (${i.launchedBy ?? 'no LaunchedBy'})`.replace(/\s+/g, ' '), reason });
  };
  for (const f of inv.fleets) {
    const ownedByCaller = o.allUsers || f.owners.includes(o.caller);
    const unknownFleet = f.queues.length === 0 && f.jobs === undefined;
    for (const i of f.instances.filter((x) => isLive(x) && mine(x))) {
      if (f.finished) instance(i, `fleet ${f.fleetId} is finished`);
      else if (unknownFleet) instance(i, `fleet ${f.fleetId} has no queues and no manifest`);
      else if (i.ageSeconds > maxSeconds) instance(i, `running ${hours(i.ageSeconds)} h, past the ${o.instanceMaxHours} h limit (fleet.instance_max_hours)`);
    }
    if (!ownedByCaller) continue;
    if (f.finished) {
      for (const q of f.queues) out.push({ kind: 'queue', id: q.url, label: q.name, reason: `fleet ${f.fleetId} is finished`, fleetId: f.fleetId });
      for (const p of f.secrets) out.push({ kind: 'parameter', id: p, label: p, reason: `secret of finished fleet ${f.fleetId}`, fleetId: f.fleetId });
    } else if (f.abandoned) {
      out.push(...fleetLeftovers(f, abandonedReason(f), o));
    }
  }
  for (const i of [...inv.sandboxes, ...inv.amiBuilders]) {
    if (!isLive(i) || !mine(i) || i.kept || i.ageSeconds <= maxSeconds) continue;
    instance(i, `${i.kind} running ${hours(i.ageSeconds)} h, past the ${o.instanceMaxHours} h limit (fleet.instance_max_hours)`);
  }
  for (const g of inv.securityGroups) {
    if (g.usedBy.some((id) => !doomed.has(id))) continue;
    out.push({ kind: 'security-group', id: g.id, label: `${g.id} ${g.name}`, reason: g.usedBy.length ? 'used only by instances removed above' : 'no instance uses it' });
  }
  return out;
}

/** Why an abandoned fleet is a leftover: "abandoned: no progress for N min, M job(s) unfinished". */
export function abandonedReason(f: FleetView): string {
  return `abandoned: no progress for ${Math.floor((f.idleSeconds ?? 0) / 60)} min, ${f.unfinished ?? 0} job(s) unfinished`;
}

/** What discarding a fleet removes: its queues and secrets, and with `deleteResults` its objects in the bucket. */
export function fleetLeftovers(f: FleetView, reason: string, o: { deleteResults: boolean; bucket: string }): Leftover[] {
  const out: Leftover[] = [];
  for (const q of f.queues) out.push({ kind: 'queue', id: q.url, label: q.name, reason, fleetId: f.fleetId });
  for (const p of f.secrets) out.push({ kind: 'parameter', id: p, label: p, reason, fleetId: f.fleetId });
  if (o.deleteResults && f.objects > 0) {
    const url = `s3://${o.bucket}/${f.fleetId}/`;
    out.push({ kind: 'results', id: url, label: `${url} (${f.objects} object(s), ${f.results} result(s))`, reason, fleetId: f.fleetId });
  }
  return out;
}

export interface CleanupResult {
  removed: Leftover[];
  /** Leftovers that could not be removed, with AWS's reason. */
  failed: Array<Leftover & { error: string }>;
}

/** Removes the leftovers: instances first (then waits until they let go of their groups), queues, parameters, results, groups. */
export async function applyCleanup(
  leftovers: Leftover[],
  c: { ec2: EC2Client; sqs: SQSClient; ssm: SSMClient; s3: S3Client },
  o: { bucket: string; releasePollMs?: number },
): Promise<CleanupResult> {
  const result: CleanupResult = { removed: [], failed: [] };
  const fail = (l: Leftover, e: unknown) => result.failed.push({ ...l, error: `${awsErrorName(e) || 'error'}: ${(e as Error).message}` });
  const byKind = (k: LeftoverKind) => leftovers.filter((l) => l.kind === k);

  const instances = byKind('instance');
  for (let i = 0; i < instances.length; i += INSTANCE_BATCH) {
    const batch = instances.slice(i, i + INSTANCE_BATCH);
    try {
      await c.ec2.send(new TerminateInstancesCommand({ InstanceIds: batch.map((l) => l.id) }));
      result.removed.push(...batch);
    } catch (e) {
      for (const l of batch) fail(l, e);
    }
  }
  for (const q of byKind('queue')) {
    try {
      await c.sqs.send(new DeleteQueueCommand({ QueueUrl: q.id }));
      result.removed.push(q);
    } catch (e) {
      if (awsErrorName(e) === 'QueueDoesNotExist') result.removed.push(q);
      else fail(q, e);
    }
  }
  const params = byKind('parameter');
  for (let i = 0; i < params.length; i += PARAMETER_BATCH) {
    const batch = params.slice(i, i + PARAMETER_BATCH);
    try {
      await c.ssm.send(new DeleteParametersCommand({ Names: batch.map((l) => l.id) }));
      result.removed.push(...batch);
    } catch (e) {
      for (const l of batch) fail(l, e);
    }
  }
  // After the queues: no worker is left to store a result once its queue is gone.
  for (const r of byKind('results')) {
    try {
      await deleteFleetObjects(c.s3, o.bucket, r.fleetId!);
      result.removed.push(r);
    } catch (e) {
      fail(r, e);
    }
  }
  const groups = byKind('security-group');
  if (groups.length && instances.length) await waitTerminated(c.ec2, instances.map((l) => l.id), o.releasePollMs ?? RELEASE_POLL_MS);
  for (const g of groups) {
    try {
      await c.ec2.send(new DeleteSecurityGroupCommand({ GroupId: g.id }));
      result.removed.push(g);
    } catch (e) {
      if (awsErrorName(e) === 'InvalidGroup.NotFound') result.removed.push(g);
      else fail(g, e);
    }
  }
  return result;
}

/** Waits (at most RELEASE_WAIT_MS) until the instances are terminated, so their groups can go. */
async function waitTerminated(ec2: EC2Client, ids: string[], pollMs: number): Promise<void> {
  const deadline = Date.now() + RELEASE_WAIT_MS;
  for (;;) {
    let r;
    try {
      r = await ec2.send(new DescribeInstancesCommand({ InstanceIds: ids }));
    } catch (e) {
      throw cloudError(e, 'waiting for terminated instances');
    }
    const pending = (r.Reservations ?? []).flatMap((x) => x.Instances ?? []).filter((i) => i.State?.Name !== 'terminated');
    if (pending.length === 0 || Date.now() > deadline) return;
    await sleep(pollMs);
  }
}

function hours(seconds: number): string {
  return (seconds / 3600).toFixed(1);
}

/**
 * What ct has in one AWS region, gathered for `ct cloud status` and `ct cloud cleanup`:
 * instances tagged ManagedBy=ct (fleet workers, single-instance sandboxes, AMI builders), the
 * fleet queues `<queue_prefix><fleet id>-work|-done|-dlq`, each fleet's results in the bucket,
 * its SSM secrets under `<secrets_prefix><fleet id>/`, and security groups tagged ManagedBy=ct.
 *
 * Glossary
 * - owner: the `LaunchedBy` tag (IAM user name or SSO session name, see credentials.ts
 *   `callerName`) of a fleet's instances, or of its queues when they carry one; a fleet with
 *   neither has no known owner and is shown and cleaned only with `--all-users`.
 * - finished fleet: every job of its manifest has a result or is in the dead-letter queue, or
 *   there is no manifest and no live instance (nothing can finish it). Its queues, secrets and
 *   workers are leftovers; its results stay.
 * - progress: the newest LastModified of any object under `{fleet_id}/` (manifest, results,
 *   worker logs), or when there is none, the newest CreatedTimestamp / LastModifiedTimestamp of
 *   its queues.
 * - abandoned fleet: unfinished (it has a manifest whose jobs results and dead letters do not
 *   cover), still holding queues or secrets, no live instance, and no progress for
 *   `fleet.stale_teardown_minutes`. A controller stops itself after that long without progress,
 *   so none is running it: its queues and secrets are leftovers; its results stay unless asked.
 * - live instance: pending, running, stopping or stopped (it still costs money or may restart).
 */
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, type EC2Client, type Filter, type Instance } from '@aws-sdk/client-ec2';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, GetQueueUrlCommand, ListQueueTagsCommand, ListQueuesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { GetParametersByPathCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { awsErrorName, cloudError } from '../errors.js';
import { fleetNames, fleetOfQueue, jobIdOfKey, type FleetNames } from '../fleet/protocol.js';
import { fleetSecretsPath } from '../fleet/secrets.js';
import { instancePrice, type PriceOptions } from './prices.js';
import { MANAGED_BY, TAGS, tagValue } from './tags.js';

export type InstanceKind = 'fleet-worker' | 'sandbox' | 'ami-builder';

/** Value of the `ct:role` tag an AMI builder instance carries. */
export const AMI_BUILDER_ROLE = 'ami-builder';

const LIVE_STATES = new Set(['pending', 'running', 'stopping', 'stopped']);

export interface CloudInstance {
  id: string;
  kind: InstanceKind;
  type: string;
  state: string;
  /** ISO time. */
  launchTime?: string;
  ageSeconds: number;
  launchedBy?: string;
  fleetId?: string;
  name?: string;
  spot: boolean;
  kept: boolean;
  securityGroups: string[];
  /** USD spent so far (running time x price), when the price is known. */
  costSoFar?: number;
}

export interface FleetQueue {
  name: string;
  url: string;
  role: 'work' | 'done' | 'dlq';
}

export interface FleetView {
  fleetId: string;
  /** LaunchedBy names seen on its instances (or queues); empty when unknown. */
  owners: string[];
  /** Its instances in any state (terminated ones count for ownership, not for cost or status). */
  instances: CloudInstance[];
  queues: FleetQueue[];
  /** Messages visible on the work queue, in flight (taken by a worker), and in the DLQ. */
  counts: { visible: number; inFlight: number; dlq: number };
  /** Jobs in its manifest (undefined without a manifest). */
  jobs?: number;
  /** Results stored so far. */
  results: number;
  /** Jobs of its manifest without a result (undefined without a manifest). */
  unfinished?: number;
  /** Objects under `{fleet_id}/` in the bucket (manifest, results, worker logs). */
  objects: number;
  /** ISO time of its last progress (see the glossary); undefined when it has neither objects nor queues. */
  lastProgress?: string;
  /** Seconds since lastProgress. */
  idleSeconds?: number;
  /** SSM parameter names holding its secrets. */
  secrets: string[];
  finished: boolean;
  /** Unfinished, holding queues or secrets, no live instance, no progress for fleet.stale_teardown_minutes. */
  abandoned: boolean;
  costSoFar: number;
}

export interface SecurityGroupView {
  id: string;
  name: string;
  /** Ids of instances (anyone's, not yet terminated) using it. */
  usedBy: string[];
}

export interface Inventory {
  region: string;
  fleets: FleetView[];
  sandboxes: CloudInstance[];
  amiBuilders: CloudInstance[];
  securityGroups: SecurityGroupView[];
}

export interface InventoryOptions {
  ec2: EC2Client;
  sqs: SQSClient;
  s3: S3Client;
  ssm: SSMClient;
  region: string;
  bucket: string;
  queuePrefix: string;
  secretsPrefix: string;
  /** fleet.stale_teardown_minutes: an unfinished fleet without progress for this long and no live instance is abandoned. */
  staleTeardownMinutes: number;
  prices: Omit<PriceOptions, 'region' | 'spot'>;
  now?: number;
}

/** Reads everything ct has in the region (every user's; callers filter by owner). */
export async function gatherInventory(o: InventoryOptions): Promise<Inventory> {
  const now = o.now ?? Date.now();
  const all = await describeInstances(o.ec2);
  const ours = all.filter((i) => tagValue(i.Tags, TAGS.managedBy) === MANAGED_BY).map((i) => toCloudInstance(i, now, o));
  const queues = await listFleetQueues(o.sqs, o.queuePrefix);
  const secrets = await listFleetSecrets(o.ssm, o.secretsPrefix);

  const ids = new Set<string>([...queues.keys(), ...secrets.keys()]);
  for (const i of ours) if (i.fleetId) ids.add(i.fleetId);
  const fleets: FleetView[] = [];
  for (const fleetId of [...ids].sort()) {
    fleets.push(await fleetView(o, now, fleetId, ours.filter((i) => i.fleetId === fleetId), queues.get(fleetId) ?? [], secrets.get(fleetId) ?? []));
  }
  // An instance still shutting down holds its groups too (deleting one fails until it is terminated).
  const holding = all.filter((i) => i.State?.Name !== 'terminated');
  const groups = await describeOurSecurityGroups(o.ec2);
  return {
    region: o.region,
    fleets,
    sandboxes: ours.filter((i) => i.kind === 'sandbox'),
    amiBuilders: ours.filter((i) => i.kind === 'ami-builder'),
    securityGroups: groups.map((g) => ({
      ...g,
      usedBy: holding.filter((i) => (i.SecurityGroups ?? []).some((s) => s.GroupId === g.id)).map((i) => i.InstanceId!),
    })),
  };
}

/** One fleet, read by its id alone (`ct fleet discard`): the same view `gatherInventory` gives it, whoever owns it. */
export async function gatherFleet(o: InventoryOptions, fleetId: string): Promise<FleetView> {
  const now = o.now ?? Date.now();
  const names = fleetNames(fleetId, o.queuePrefix);
  const tagged = await describeInstances(o.ec2, [
    { Name: `tag:${TAGS.fleetId}`, Values: [fleetId] },
    { Name: `tag:${TAGS.managedBy}`, Values: [MANAGED_BY] },
  ]);
  const queues: FleetQueue[] = [];
  for (const [role, name] of [['work', names.workQueue], ['done', names.doneQueue], ['dlq', names.deadLetterQueue]] as const) {
    try {
      queues.push({ name, url: (await o.sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl!, role });
    } catch (e) {
      if (awsErrorName(e) !== 'QueueDoesNotExist') throw cloudError(e, `looking up queue ${name}`);
    }
  }
  const secrets = await parametersUnder(o.ssm, fleetSecretsPath(o.secretsPrefix, fleetId));
  return fleetView(o, now, fleetId, tagged.map((i) => toCloudInstance(i, now, o)), queues, secrets);
}

/** A fleet's view from its instances, queues and secrets, with its counts, results and progress read from SQS and S3. */
async function fleetView(o: InventoryOptions, now: number, fleetId: string, instances: CloudInstance[], qs: FleetQueue[], secrets: string[]): Promise<FleetView> {
  const { counts, changed } = await queueState(o.sqs, qs);
  const owners = new Set(instances.map((i) => i.launchedBy).filter((x): x is string => Boolean(x)));
  if (owners.size === 0) for (const owner of await queueOwners(o.sqs, qs)) owners.add(owner);
  const stored = await fleetObjects(o.s3, o.bucket, fleetId, protocolNames(fleetId, o.queuePrefix));
  const live = instances.filter((i) => LIVE_STATES.has(i.state));
  const unfinished = stored.jobIds?.filter((id) => !stored.results.has(id)).length;
  const finished = unfinished !== undefined ? unfinished <= counts.dlq : live.length === 0;
  const progress = stored.newest ?? changed;
  const idleSeconds = progress !== undefined ? Math.max(0, Math.floor((now - progress) / 1000)) : undefined;
  const abandoned =
    !finished &&
    unfinished !== undefined &&
    live.length === 0 &&
    (qs.length > 0 || secrets.length > 0) &&
    idleSeconds !== undefined &&
    idleSeconds >= o.staleTeardownMinutes * 60;
  return {
    fleetId,
    owners: [...owners].sort(),
    instances,
    queues: qs,
    counts,
    ...(stored.jobIds ? { jobs: stored.jobIds.length, unfinished } : {}),
    results: stored.results.size,
    objects: stored.objects,
    ...(progress !== undefined ? { lastProgress: new Date(progress).toISOString(), idleSeconds } : {}),
    secrets,
    finished,
    abandoned,
    costSoFar: live.reduce((sum, i) => sum + (i.costSoFar ?? 0), 0),
  };
}

/** Whether an instance is live (pending, running, stopping, stopped). */
export function isLive(i: CloudInstance): boolean {
  return LIVE_STATES.has(i.state);
}

function toCloudInstance(i: Instance, now: number, o: InventoryOptions): CloudInstance {
  const fleetId = tagValue(i.Tags, TAGS.fleetId);
  const role = tagValue(i.Tags, TAGS.role);
  const kind: InstanceKind = fleetId ? 'fleet-worker' : role === AMI_BUILDER_ROLE ? 'ami-builder' : 'sandbox';
  const launched = i.LaunchTime ? new Date(i.LaunchTime).getTime() : now;
  const ageSeconds = Math.max(0, Math.round((now - launched) / 1000));
  const spot = i.InstanceLifecycle === 'spot';
  const type = String(i.InstanceType ?? 'unknown');
  let costSoFar: number | undefined;
  try {
    costSoFar = LIVE_STATES.has(i.State?.Name ?? '') ? (instancePrice(type, { ...o.prices, region: o.region, spot }).usdPerHour * ageSeconds) / 3600 : 0;
  } catch {
    // A type the price table lacks: status shows no cost for it rather than failing.
  }
  const launchedBy = tagValue(i.Tags, TAGS.launchedBy);
  const name = tagValue(i.Tags, TAGS.name);
  return {
    id: i.InstanceId!,
    kind,
    type,
    state: i.State?.Name ?? 'unknown',
    ...(i.LaunchTime ? { launchTime: new Date(i.LaunchTime).toISOString() } : {}),
    ageSeconds,
    ...(launchedBy ? { launchedBy } : {}),
    ...(fleetId ? { fleetId } : {}),
    ...(name ? { name } : {}),
    spot,
    kept: tagValue(i.Tags, TAGS.kept) === 'true',
    securityGroups: (i.SecurityGroups ?? []).map((g) => g.GroupId!).filter(Boolean),
    ...(costSoFar !== undefined ? { costSoFar } : {}),
  };
}

/** Every instance in the region (those `Filters` select), any state (security groups in use are judged against all of them). */
async function describeInstances(ec2: EC2Client, Filters?: Filter[]): Promise<Instance[]> {
  const out: Instance[] = [];
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await ec2.send(new DescribeInstancesCommand({ NextToken, ...(Filters ? { Filters } : {}) }));
    } catch (e) {
      throw cloudError(e, 'listing EC2 instances');
    }
    for (const res of r.Reservations ?? []) out.push(...(res.Instances ?? []));
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

/** The fleet queues by fleet id: names `<prefix><fleet id>-work|-done|-dlq`. */
async function listFleetQueues(sqs: SQSClient, prefix: string): Promise<Map<string, FleetQueue[]>> {
  const out = new Map<string, FleetQueue[]>();
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await sqs.send(new ListQueuesCommand({ QueueNamePrefix: prefix, MaxResults: 1000, NextToken }));
    } catch (e) {
      throw cloudError(e, `listing SQS queues named ${prefix}*`);
    }
    for (const url of r.QueueUrls ?? []) {
      const name = url.split('/').pop()!;
      const of = fleetOfQueue(name, prefix);
      if (!of) continue;
      out.set(of.fleetId, [...(out.get(of.fleetId) ?? []), { name, url, role: of.role }]);
    }
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

/** Message counts of the work queue and the DLQ, and when either was last created or changed (epoch ms; undefined without queues). */
async function queueState(sqs: SQSClient, qs: FleetQueue[]): Promise<{ counts: FleetView['counts']; changed?: number }> {
  const counts = { visible: 0, inFlight: 0, dlq: 0 };
  let changed: number | undefined;
  for (const q of qs) {
    if (q.role === 'done') continue;
    let a: Record<string, string> | undefined;
    try {
      a = (
        await sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: q.url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'CreatedTimestamp', 'LastModifiedTimestamp'],
          }),
        )
      ).Attributes;
    } catch (e) {
      if (awsErrorName(e) === 'QueueDoesNotExist') continue;
      throw cloudError(e, `reading queue ${q.name}`);
    }
    // Epoch seconds.
    for (const t of [a?.CreatedTimestamp, a?.LastModifiedTimestamp]) if (t && Number(t) > 0) changed = Math.max(changed ?? 0, Number(t) * 1000);
    const visible = Number(a?.ApproximateNumberOfMessages ?? 0);
    if (q.role === 'dlq') counts.dlq += visible + Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0);
    else {
      counts.visible += visible;
      counts.inFlight += Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0);
    }
  }
  return { counts, ...(changed !== undefined ? { changed } : {}) };
}

/** LaunchedBy tags on a fleet's queues (set by controllers that know their caller). */
async function queueOwners(sqs: SQSClient, qs: FleetQueue[]): Promise<string[]> {
  const owners = new Set<string>();
  for (const q of qs) {
    try {
      const tags = (await sqs.send(new ListQueueTagsCommand({ QueueUrl: q.url }))).Tags ?? {};
      if (tags[TAGS.launchedBy]) owners.add(tags[TAGS.launchedBy]!);
    } catch (e) {
      if (awsErrorName(e) === 'QueueDoesNotExist') continue;
      throw cloudError(e, `reading queue ${q.name}'s tags`);
    }
  }
  return [...owners];
}

interface FleetObjects {
  /** The manifest's job ids (undefined without a readable manifest). */
  jobIds?: string[];
  /** Job ids with a stored result. */
  results: Set<string>;
  objects: number;
  /** The newest LastModified (epoch ms) under the fleet's prefix. */
  newest?: number;
}

/** The protocol's names for a fleet id, or undefined for an id no fleet can have (a FleetId tag or SSM path set by hand). */
function protocolNames(fleetId: string, queuePrefix: string): FleetNames | undefined {
  try {
    return fleetNames(fleetId, queuePrefix);
  } catch {
    return undefined;
  }
}

/** The fleet's manifest and every object under `{fleet_id}/` (a missing bucket or manifest: none). */
async function fleetObjects(s3: S3Client, bucket: string, fleetId: string, names: FleetNames | undefined): Promise<FleetObjects> {
  if (!names) return { results: new Set(), objects: 0 };
  let jobIds: string[] | undefined;
  try {
    const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: names.manifestKey }));
    const manifest = JSON.parse(await r.Body!.transformToString()) as { jobs?: unknown[] };
    if (Array.isArray(manifest.jobs)) jobIds = manifest.jobs.map((j, i) => (j && typeof j === 'object' && typeof (j as { job_id?: unknown }).job_id === 'string' ? (j as { job_id: string }).job_id : `#${i}`));
  } catch (e) {
    if (!/^(NoSuchKey|NoSuchBucket|NotFound)$/.test(awsErrorName(e)) && !(e instanceof SyntaxError)) throw cloudError(e, `reading s3://${bucket}/${names.manifestKey}`);
  }
  const out: FleetObjects = { ...(jobIds ? { jobIds } : {}), results: new Set(), objects: 0 };
  let ContinuationToken: string | undefined;
  do {
    let r;
    try {
      r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: names.resultPrefix, ContinuationToken }));
    } catch (e) {
      if (awsErrorName(e) === 'NoSuchBucket') break;
      throw cloudError(e, `listing s3://${bucket}/${names.resultPrefix}`);
    }
    for (const c of r.Contents ?? []) {
      out.objects++;
      const job = c.Key ? jobIdOfKey(fleetId, c.Key) : undefined;
      if (job !== undefined) out.results.add(job);
      if (c.LastModified) out.newest = Math.max(out.newest ?? 0, new Date(c.LastModified).getTime());
    }
    ContinuationToken = r.NextContinuationToken;
  } while (ContinuationToken);
  return out;
}

/** Secret parameter names by fleet id, from `<prefix><fleet id>/NAME`. */
async function listFleetSecrets(ssm: SSMClient, prefix: string): Promise<Map<string, string[]>> {
  const base = `${prefix.startsWith('/') ? '' : '/'}${prefix}${prefix.endsWith('/') ? '' : '/'}`;
  const out = new Map<string, string[]>();
  for (const name of await parametersUnder(ssm, base)) {
    const rest = name.slice(base.length);
    const slash = rest.indexOf('/');
    if (slash <= 0) continue;
    const id = rest.slice(0, slash);
    out.set(id, [...(out.get(id) ?? []), name]);
  }
  return out;
}

/** Names of the parameters under an SSM path (ending in `/`), at any depth. */
async function parametersUnder(ssm: SSMClient, path: string): Promise<string[]> {
  const out: string[] = [];
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await ssm.send(new GetParametersByPathCommand({ Path: path, Recursive: true, NextToken }));
    } catch (e) {
      throw cloudError(e, `listing SSM parameters under ${path}`);
    }
    for (const p of r.Parameters ?? []) if (p.Name) out.push(p.Name);
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

async function describeOurSecurityGroups(ec2: EC2Client): Promise<Array<{ id: string; name: string }>> {
  const out: Array<{ id: string; name: string }> = [];
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await ec2.send(new DescribeSecurityGroupsCommand({ Filters: [{ Name: `tag:${TAGS.managedBy}`, Values: [MANAGED_BY] }], NextToken }));
    } catch (e) {
      throw cloudError(e, 'listing security groups');
    }
    for (const g of r.SecurityGroups ?? []) out.push({ id: g.GroupId!, name: g.GroupName ?? '' });
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

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
 * - live instance: pending, running, stopping or stopped (it still costs money or may restart).
 */
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, type EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand, ListQueueTagsCommand, ListQueuesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { GetParametersByPathCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { awsErrorName, cloudError } from '../errors.js';
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
  /** SSM parameter names holding its secrets. */
  secrets: string[];
  finished: boolean;
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
    const qs = queues.get(fleetId) ?? [];
    const instances = ours.filter((i) => i.fleetId === fleetId);
    const counts = await queueCounts(o.sqs, qs);
    const owners = new Set(instances.map((i) => i.launchedBy).filter((x): x is string => Boolean(x)));
    if (owners.size === 0) for (const owner of await queueOwners(o.sqs, qs)) owners.add(owner);
    const { jobs, results } = await fleetResults(o.s3, o.bucket, fleetId);
    const live = instances.filter((i) => LIVE_STATES.has(i.state));
    const finished = jobs !== undefined ? results + counts.dlq >= jobs : live.length === 0;
    fleets.push({
      fleetId,
      owners: [...owners].sort(),
      instances,
      queues: qs,
      counts,
      ...(jobs !== undefined ? { jobs } : {}),
      results,
      secrets: secrets.get(fleetId) ?? [],
      finished,
      costSoFar: live.reduce((sum, i) => sum + (i.costSoFar ?? 0), 0),
    });
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

/** Every instance in the region, any state (security groups in use are judged against all of them). */
async function describeInstances(ec2: EC2Client): Promise<Instance[]> {
  const out: Instance[] = [];
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await ec2.send(new DescribeInstancesCommand({ NextToken }));
    } catch (e) {
      throw cloudError(e, 'listing EC2 instances');
    }
    for (const res of r.Reservations ?? []) out.push(...(res.Instances ?? []));
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

const QUEUE_ROLE = /^(.+)-(work|done|dlq)$/;

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
      if (!name.startsWith(prefix)) continue;
      const m = QUEUE_ROLE.exec(name.slice(prefix.length));
      if (!m) continue;
      const list = out.get(m[1]!) ?? [];
      list.push({ name, url, role: m[2] as FleetQueue['role'] });
      out.set(m[1]!, list);
    }
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

async function queueCounts(sqs: SQSClient, qs: FleetQueue[]): Promise<FleetView['counts']> {
  const counts = { visible: 0, inFlight: 0, dlq: 0 };
  for (const q of qs) {
    if (q.role === 'done') continue;
    let a: Record<string, string> | undefined;
    try {
      a = (
        await sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: q.url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
        )
      ).Attributes;
    } catch (e) {
      if (awsErrorName(e) === 'QueueDoesNotExist') continue;
      throw cloudError(e, `reading queue ${q.name}`);
    }
    const visible = Number(a?.ApproximateNumberOfMessages ?? 0);
    if (q.role === 'dlq') counts.dlq += visible + Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0);
    else {
      counts.visible += visible;
      counts.inFlight += Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0);
    }
  }
  return counts;
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

/** The manifest's job count and the results stored so far (a missing bucket or manifest: none). */
async function fleetResults(s3: S3Client, bucket: string, fleetId: string): Promise<{ jobs?: number; results: number }> {
  let jobs: number | undefined;
  try {
    const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: `${fleetId}/manifest.json` }));
    const manifest = JSON.parse(await r.Body!.transformToString()) as { jobs?: unknown[] };
    if (Array.isArray(manifest.jobs)) jobs = manifest.jobs.length;
  } catch (e) {
    if (!/^(NoSuchKey|NoSuchBucket|NotFound)$/.test(awsErrorName(e)) && !(e instanceof SyntaxError)) throw cloudError(e, `reading s3://${bucket}/${fleetId}/manifest.json`);
  }
  let results = 0;
  let ContinuationToken: string | undefined;
  do {
    let r;
    try {
      // Results are the .eval objects directly under the prefix; logs/ is one common prefix.
      r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${fleetId}/`, Delimiter: '/', ContinuationToken }));
    } catch (e) {
      if (awsErrorName(e) === 'NoSuchBucket') break;
      throw cloudError(e, `listing s3://${bucket}/${fleetId}/`);
    }
    results += (r.Contents ?? []).filter((c) => c.Key?.endsWith('.eval')).length;
    ContinuationToken = r.NextContinuationToken;
  } while (ContinuationToken);
  return { ...(jobs !== undefined ? { jobs } : {}), results };
}

/** Secret parameter names by fleet id, from `<prefix><fleet id>/NAME`. */
async function listFleetSecrets(ssm: SSMClient, prefix: string): Promise<Map<string, string[]>> {
  const base = `${prefix.startsWith('/') ? '' : '/'}${prefix}${prefix.endsWith('/') ? '' : '/'}`;
  const out = new Map<string, string[]>();
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await ssm.send(new GetParametersByPathCommand({ Path: base, Recursive: true, NextToken }));
    } catch (e) {
      throw cloudError(e, `listing SSM parameters under ${base}`);
    }
    for (const p of r.Parameters ?? []) {
      const rest = p.Name?.slice(base.length) ?? '';
      const slash = rest.indexOf('/');
      if (slash <= 0) continue;
      const id = rest.slice(0, slash);
      out.set(id, [...(out.get(id) ?? []), p.Name!]);
    }
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

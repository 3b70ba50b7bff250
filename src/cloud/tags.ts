import type { Tag } from '@aws-sdk/client-ec2';

/**
 * Tags on everything ct creates in AWS, so a later cleanup (and the account's IAM policy, which
 * requires LaunchedBy and ManagedBy on RunInstances) can find and scope it.
 */
export const TAGS = {
  name: 'Name',
  /** The IAM user or SSO session name of whoever launched it. */
  launchedBy: 'LaunchedBy',
  /** Always MANAGED_BY. */
  managedBy: 'ManagedBy',
  /** The `ct run` that owns it (ct's run id). */
  runId: 'ct:run-id',
  /** The machine that launched it (cleanup only judges runs of its own machine). */
  host: 'ct:host',
  /** Set to `true` at launch on an instance run with --keep-ec2-instance; cleanup leaves it unless --all. */
  kept: 'ct:kept',
  /** What a ct instance is for when neither FleetId nor ct:run-id says it: `ami-builder`. */
  role: 'ct:role',
  /** The fleet a resource belongs to (workers, its SSM secrets); the spec's name. */
  fleetId: 'FleetId',
} as const;

export const MANAGED_BY = 'ct';

export function toTags(record: Record<string, string>): Tag[] {
  return Object.entries(record).map(([Key, Value]) => ({ Key, Value }));
}

export function tagValue(tags: Tag[] | undefined, key: string): string | undefined {
  return tags?.find((t) => t.Key === key)?.Value;
}

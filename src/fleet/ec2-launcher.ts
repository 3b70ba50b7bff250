/**
 * `--workers ec2` (`--ec2`): fleet workers as EC2 instances that bootstrap themselves from their
 * user-data (user-data.ts) and terminate when they shut down.
 *
 * - One RunInstances per start with MinCount = MaxCount (all or nothing: no partial fleet).
 * - Spot by default; a spot launch refused for capacity (`isCapacityError`) is made again
 *   on-demand with a new client token (the old token names the refused request). `--on-demand`
 *   skips spot.
 * - Other failures that a retry may fix are tried again, `launch_attempts` times in a row at most
 *   (1 s, 2 s, 4 s ... apart); then the launch fails with EC2's own error. Refusals (no permission,
 *   bad profile, limits) fail at once.
 * - A worker whose instance ended before it took a job is a bootstrap failure: the user-data
 *   uploaded its log. After `bootstrap_failures` in a row no more are launched, and the tail of the
 *   last log is the failure the controller shows.
 */
import { DescribeInstancesCommand, RunInstancesCommand, TerminateInstancesCommand, type EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { randomUUID } from 'node:crypto';
import { CloudError, ConfigError, awsErrorName, cloudError, isCapacityError, isRetryableAwsError } from '../errors.js';
import { backoffDelays, sleep } from '../host/backoff.js';
import { MANAGED_BY, TAGS, toTags } from '../cloud/tags.js';
import type { FleetLauncher } from './launcher.js';
import { INSTANCE_METADATA_OPTIONS } from '../cloud/instance-metadata.js';

export interface Ec2LauncherOptions {
  ec2: EC2Client;
  s3: S3Client;
  fleetId: string;
  region: string;
  bucket: string;
  imageId: string;
  instanceType: string;
  securityGroupId: string;
  subnetId?: string;
  rootVolumeGb: number;
  /** Instance profile name (fleet.instance_profile). */
  instanceProfile: string;
  /** The caller's IAM user or SSO session name (LaunchedBy tag). */
  launchedBy: string;
  /** Instances are named `<namePrefix>fleet-worker-<fleet id>`. */
  namePrefix: string;
  spot: boolean;
  userData: string;
  /** fleet.launch_attempts. */
  launchAttempts: number;
  /** fleet.bootstrap_failures. */
  bootstrapFailures: number;
  /** Lines for the user (launch, spot fallback, console link). */
  note: (line: string) => void;
}

/** Lines of a failed bootstrap log shown to the user. */
const LOG_TAIL_LINES = 20;
/** The line user-data writes when a step failed (user-data.ts). */
const BOOTSTRAP_FAILED = /bootstrap failed at step (\S+)/;

export class Ec2Launcher implements FleetLauncher {
  readonly kind = 'ec2' as const;
  /** Instance ids launched, in order. */
  private readonly ids: string[] = [];
  /** Ids seen ended (shutting-down or terminated) and already judged. */
  private readonly ended = new Set<string>();
  private failuresInRow = 0;
  private failure?: string;
  /** How the last launch went: spot, or on-demand (chosen or fallen back to). */
  market?: 'spot' | 'on-demand';

  constructor(private readonly o: Ec2LauncherOptions) {}

  async start(n: number): Promise<number> {
    if (n <= 0) return 0;
    if (this.failuresInRow >= this.o.bootstrapFailures) return 0;
    const instances = await this.launch(n);
    this.ids.push(...instances.map((i) => i.InstanceId!));
    this.o.note(`launched ${instances.length} ${this.o.instanceType} ${this.market} instance(s): ${instances.map((i) => i.InstanceId).join(', ')}`);
    this.o.note(`EC2 console: ${consoleUrl(this.o.region, this.o.fleetId)}`);
    return instances.length;
  }

  private async launch(n: number): Promise<Instance[]> {
    let spot = this.o.spot;
    let failures = 0;
    const delays = backoffDelays(this.o.launchAttempts, 1000, 8000);
    for (;;) {
      try {
        const r = await this.o.ec2.send(this.runInstances(n, spot));
        const got = r.Instances ?? [];
        if (got.length !== n) throw new CloudError(`RunInstances returned ${got.length} instance(s) instead of ${n}`, true);
        this.market = spot ? 'spot' : 'on-demand';
        return got;
      } catch (e) {
        if (spot && isCapacityError(e)) {
          this.o.note(`no spot capacity for ${this.o.instanceType} (${awsErrorName(e)}): launching on-demand instead`);
          spot = false;
          continue;
        }
        const name = awsErrorName(e);
        if (/InstanceLimitExceeded|VcpuLimitExceeded/.test(name)) {
          throw new ConfigError(`EC2 refused the launch (${name}: ${(e as Error).message}); request a limit increase, lower --max-workers or pick a smaller instance type`);
        }
        if (/Unauthorized|AccessDenied/.test(name)) {
          throw new ConfigError(`your AWS identity may not launch fleet workers (${name}): ${(e as Error).message.split('Encoded authorization')[0]}`);
        }
        failures++;
        if (!(isRetryableAwsError(e) || e instanceof CloudError) || failures >= this.o.launchAttempts) {
          throw cloudError(e, `launching ${n} ${this.o.instanceType} worker(s) failed${failures > 1 ? ` ${failures} times in a row` : ''}`);
        }
        await sleep(delays[failures - 1]!);
      }
    }
  }

  private runInstances(n: number, spot: boolean): RunInstancesCommand {
    const tags = toTags({
      [TAGS.name]: `${this.o.namePrefix}fleet-worker-${this.o.fleetId}`,
      [TAGS.fleetId]: this.o.fleetId,
      [TAGS.launchedBy]: this.o.launchedBy,
      [TAGS.managedBy]: MANAGED_BY,
    });
    return new RunInstancesCommand({
      ImageId: this.o.imageId,
      InstanceType: this.o.instanceType as never,
      MinCount: n,
      MaxCount: n,
      // A fresh token per attempt: a retried request with the same token would name the refused one.
      ClientToken: `ct-${this.o.fleetId}-${randomUUID()}`.slice(0, 64),
      SecurityGroupIds: [this.o.securityGroupId],
      ...(this.o.subnetId ? { SubnetId: this.o.subnetId } : {}),
      IamInstanceProfile: { Name: this.o.instanceProfile },
      InstanceInitiatedShutdownBehavior: 'terminate',
      MetadataOptions: INSTANCE_METADATA_OPTIONS,
      UserData: Buffer.from(this.o.userData).toString('base64'),
      BlockDeviceMappings: [{ DeviceName: '/dev/sda1', Ebs: { VolumeSize: this.o.rootVolumeGb, VolumeType: 'gp3', DeleteOnTermination: true } }],
      ...(spot ? { InstanceMarketOptions: { MarketType: 'spot', SpotOptions: { SpotInstanceType: 'one-time', InstanceInterruptionBehavior: 'terminate' } } } : {}),
      TagSpecifications: [
        { ResourceType: 'instance', Tags: tags },
        { ResourceType: 'volume', Tags: tags },
      ],
    });
  }

  /** Instances of this launcher, by state. */
  private async describe(): Promise<Instance[]> {
    if (this.ids.length === 0) return [];
    const out: Instance[] = [];
    let NextToken: string | undefined;
    do {
      const r = await this.o.ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: `tag:${TAGS.fleetId}`, Values: [this.o.fleetId] }], NextToken }));
      for (const res of r.Reservations ?? []) out.push(...(res.Instances ?? []).filter((i) => this.ids.includes(i.InstanceId!)));
      NextToken = r.NextToken;
    } while (NextToken);
    return out;
  }

  async alive(): Promise<number> {
    const all = await this.describe();
    const live = all.filter((i) => i.State?.Name === 'pending' || i.State?.Name === 'running');
    for (const i of all) {
      if (live.includes(i) || this.ended.has(i.InstanceId!)) continue;
      this.ended.add(i.InstanceId!);
      await this.judge(i.InstanceId!);
    }
    return live.length;
  }

  /** Reads an ended instance's bootstrap log: a failed bootstrap counts, a worker that ran resets the count. */
  private async judge(id: string): Promise<void> {
    const text = await this.bootstrapLog(id);
    const failed = text !== undefined && BOOTSTRAP_FAILED.exec(text);
    if (failed) {
      this.failuresInRow++;
      const tail = text.trimEnd().split('\n').slice(-LOG_TAIL_LINES).join('\n');
      this.failure = `worker ${id} failed to bootstrap at step ${failed[1]} (${this.failuresInRow} in a row); its log s3://${this.o.bucket}/${this.logKey(id)} ends:\n${tail}`;
    } else if (text !== undefined && /worker: start/.test(text)) {
      this.failuresInRow = 0;
    } else if (text === undefined) {
      this.failure = `worker ${id} ended without a bootstrap log (s3://${this.o.bucket}/${this.logKey(id)})`;
    }
  }

  private logKey(id: string): string {
    return `${this.o.fleetId}/logs/${id}-bootstrap.log`;
  }

  private async bootstrapLog(id: string): Promise<string | undefined> {
    try {
      const r = await this.o.s3.send(new GetObjectCommand({ Bucket: this.o.bucket, Key: this.logKey(id) }));
      return await r.Body!.transformToString();
    } catch (e) {
      if (awsErrorName(e) === 'NoSuchKey' || awsErrorName(e) === 'NoSuchBucket') return undefined;
      // Judging is best effort: an unreadable log must not stop the fleet.
      this.o.note(`could not read the bootstrap log of ${id}: ${(e as Error).message}`);
      return undefined;
    }
  }

  /** True once `bootstrap_failures` workers in a row failed to bootstrap. */
  bootstrapGaveUp(): boolean {
    return this.failuresInRow >= this.o.bootstrapFailures;
  }

  names(): string[] {
    return [...this.ids];
  }

  lastFailure(): string | undefined {
    return this.failure;
  }

  /** Terminates every instance it launched that has not ended. */
  async stopAll(): Promise<void> {
    const live = (await this.describe()).filter((i) => !['shutting-down', 'terminated'].includes(i.State?.Name ?? '')).map((i) => i.InstanceId!);
    if (live.length) await this.o.ec2.send(new TerminateInstancesCommand({ InstanceIds: live }));
  }

  workerCommand(): string {
    return `EC2 instances tagged FleetId=${this.o.fleetId} (${consoleUrl(this.o.region, this.o.fleetId)})`;
  }
}

/** The EC2 console's instance list, filtered to one fleet. */
export function consoleUrl(region: string, fleetId: string): string {
  return `https://${region}.console.aws.amazon.com/ec2/home?region=${region}#Instances:tag:FleetId=${fleetId}`;
}

import {
  DescribeInstanceTypesCommand,
  DescribeInstancesCommand,
  RunInstancesCommand,
  TerminateInstancesCommand,
  type EC2Client,
  type Instance,
  type _InstanceType,
} from '@aws-sdk/client-ec2';
import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { CancelledError, CloudError, ConfigError, awsErrorName, cloudError } from '../errors.js';
import { sleep } from '../host/backoff.js';
import { toTags } from './tags.js';
import { INSTANCE_METADATA_OPTIONS } from './instance-metadata.js';

/** How often an instance's state is polled while it starts. */
const STATE_POLL_MS = 2_000;

/**
 * Checks that the region offers `instanceType`, before anything is launched: an unknown or
 * misspelt type is a ConfigError naming it (RunInstances would only refuse it after the security
 * group exists). Returns its default vCPUs and memory.
 */
export async function checkInstanceType(ec2: EC2Client, instanceType: string, region?: string): Promise<{ vcpus: number; memoryGiB: number }> {
  try {
    const r = await ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] }));
    const t = r.InstanceTypes?.[0];
    if (t?.VCpuInfo?.DefaultVCpus && t.MemoryInfo?.SizeInMiB) return { vcpus: t.VCpuInfo.DefaultVCpus, memoryGiB: t.MemoryInfo.SizeInMiB / 1024 };
  } catch (e) {
    if (!/InvalidInstanceType|InvalidParameterValue/.test(awsErrorName(e))) throw cloudError(e, `describing instance type ${instanceType}`);
  }
  throw new ConfigError(
    `unknown instance type ${instanceType} (--ec2-instance-type, CT_EC2_INSTANCE_TYPE): EC2${region ? ` in ${region}` : ''} does not offer it; ` +
      `pick one it does (\`aws ec2 describe-instance-type-offerings${region ? ` --region ${region}` : ''}\`), e.g. c7i.4xlarge or t3.large`,
  );
}

/** The AMI to launch: `ami` when given, else the id stored in the public SSM parameter. */
export async function resolveAmi(ssm: SSMClient, o: { ami?: string; parameter: string }): Promise<string> {
  if (o.ami) return o.ami;
  try {
    const r = await ssm.send(new GetParameterCommand({ Name: o.parameter }));
    const id = r.Parameter?.Value;
    if (!id) throw new Error('empty value');
    return id;
  } catch (e) {
    throw new ConfigError(
      `cannot read the AMI id from SSM parameter ${o.parameter} (${(e as Error).message}); ` +
        'set ec2.ami (CT_EC2_AMI) to an Ubuntu 22.04 AMI id, or ec2.ami_parameter to another parameter',
    );
  }
}

export interface LaunchOptions {
  imageId: string;
  instanceType: string;
  securityGroupId: string;
  subnetId?: string;
  rootVolumeGb: number;
  tags: Record<string, string>;
  /** Makes a retried launch return the same instance instead of a second one (max 64 chars). */
  clientToken: string;
}

/**
 * Launches one instance. The root volume is sized for images and containers (Ubuntu's AMI
 * default is 8 GiB); metadata requires IMDSv2 tokens; a shutdown from inside terminates it.
 */
export async function launchInstance(ec2: EC2Client, o: LaunchOptions): Promise<Instance> {
  let r;
  try {
    r = await ec2.send(
      new RunInstancesCommand({
        ImageId: o.imageId,
        InstanceType: o.instanceType as never,
        MinCount: 1,
        MaxCount: 1,
        ClientToken: o.clientToken,
        SecurityGroupIds: [o.securityGroupId],
        ...(o.subnetId ? { SubnetId: o.subnetId } : {}),
        InstanceInitiatedShutdownBehavior: 'terminate',
        MetadataOptions: INSTANCE_METADATA_OPTIONS,
        BlockDeviceMappings: [{ DeviceName: '/dev/sda1', Ebs: { VolumeSize: o.rootVolumeGb, VolumeType: 'gp3', DeleteOnTermination: true } }],
        TagSpecifications: [
          { ResourceType: 'instance', Tags: toTags(o.tags) },
          { ResourceType: 'volume', Tags: toTags(o.tags) },
        ],
      }),
    );
  } catch (e) {
    const name = awsErrorName(e);
    const msg = (e as Error).message;
    if (/InstanceLimitExceeded|VcpuLimitExceeded/.test(name)) {
      throw new ConfigError(`EC2 refused the launch (${name}: ${msg}); request a limit increase or pick a smaller --ec2-instance-type`);
    }
    if (/Unauthorized|AccessDenied/.test(name)) {
      throw new ConfigError(`your AWS identity may not launch instances (${name}): ${msg.split('Encoded authorization')[0]}`);
    }
    throw cloudError(e, name === 'InsufficientInstanceCapacity' ? `EC2 has no ${o.instanceType} capacity right now` : 'launching the EC2 instance failed');
  }
  const inst = r.Instances?.[0];
  if (!inst?.InstanceId) throw new CloudError('RunInstances returned no instance', false);
  return inst;
}

export async function describeInstance(ec2: EC2Client, instanceId: string): Promise<Instance | undefined> {
  const r = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [instanceId] }));
  return r.Reservations?.[0]?.Instances?.[0];
}

/** Polls until the instance is `running` (every 2 s, up to `timeoutMs`); fails if it ends instead. */
export async function waitForRunning(ec2: EC2Client, instanceId: string, timeoutMs: number, signal?: AbortSignal): Promise<Instance> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (signal?.aborted) throw new CancelledError('cancelled while the instance was starting');
    let inst: Instance | undefined;
    try {
      inst = await describeInstance(ec2, instanceId);
    } catch (e) {
      // Right after launch the id may not be visible yet (eventual consistency).
      if (awsErrorName(e) !== 'InvalidInstanceID.NotFound') throw cloudError(e, `describing instance ${instanceId}`);
    }
    const state = inst?.State?.Name;
    if (state === 'running') return inst!;
    if (state === 'shutting-down' || state === 'terminated' || state === 'stopped' || state === 'stopping') {
      throw new CloudError(`instance ${instanceId} is ${state} instead of starting (${inst?.StateReason?.Message ?? 'no reason given'})`, true);
    }
    if (Date.now() > deadline) throw new CloudError(`instance ${instanceId} did not reach running within ${Math.round(timeoutMs / 1000)} s`, true);
    await sleep(STATE_POLL_MS, signal);
  }
}

export async function terminateInstance(ec2: EC2Client, instanceId: string): Promise<void> {
  await ec2.send(new TerminateInstancesCommand({ InstanceIds: [instanceId] }));
}

/** Instances (not yet terminated) whose tags match all of `tags`. */
export async function findInstances(ec2: EC2Client, tags: Record<string, string>): Promise<Instance[]> {
  const out: Instance[] = [];
  let NextToken: string | undefined;
  do {
    const r = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [
          ...Object.entries(tags).map(([k, v]) => ({ Name: `tag:${k}`, Values: [v] })),
          { Name: 'instance-state-name', Values: ['pending', 'running', 'stopping', 'stopped'] },
        ],
        NextToken,
      }),
    );
    for (const res of r.Reservations ?? []) out.push(...(res.Instances ?? []));
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

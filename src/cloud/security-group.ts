import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type EC2Client,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import { ConfigError, awsErrorName, cloudError } from '../errors.js';
import { MANAGED_BY, TAGS, toTags } from './tags.js';

export interface SshSecurityGroupOptions {
  /** Group name (default config: linuxbench-eval-sg). */
  name: string;
  /** Subnet the instance goes to; default: the default VPC. */
  subnetId?: string;
  /** Range allowed to reach port 22. */
  cidr: string;
  ipVersion: 4 | 6;
  /** Who is asking, for the rule's description. */
  launchedBy: string;
}

/** The VPC of a subnet, or the region's default VPC. */
export async function resolveVpc(ec2: EC2Client, subnetId?: string): Promise<string> {
  if (subnetId) {
    const r = await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }));
    const vpc = r.Subnets?.[0]?.VpcId;
    if (!vpc) throw new ConfigError(`subnet ${subnetId} (ec2.subnet_id) was not found`);
    return vpc;
  }
  const r = await ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: 'is-default', Values: ['true'] }] }));
  const vpc = r.Vpcs?.[0]?.VpcId;
  if (!vpc) throw new ConfigError('this region has no default VPC; set ec2.subnet_id (CT_EC2_SUBNET_ID) to a subnet with public IPs');
  return vpc;
}

async function findGroup(ec2: EC2Client, name: string, vpcId: string): Promise<SecurityGroup | undefined> {
  const r = await ec2.send(
    new DescribeSecurityGroupsCommand({
      Filters: [
        { Name: 'group-name', Values: [name] },
        { Name: 'vpc-id', Values: [vpcId] },
      ],
    }),
  );
  return r.SecurityGroups?.[0];
}

/**
 * The group `name` in the subnet's VPC (default VPC without one), created (tagged Name and
 * ManagedBy, no inbound rule) when missing; a group another ct process created meanwhile is used.
 */
async function findOrCreateGroup(ec2: EC2Client, name: string, subnetId: string | undefined, description: string): Promise<SecurityGroup> {
  const vpcId = await resolveVpc(ec2, subnetId);
  const existing = await findGroup(ec2, name, vpcId);
  if (existing?.GroupId) return existing;
  try {
    await ec2.send(
      new CreateSecurityGroupCommand({
        GroupName: name,
        Description: description,
        VpcId: vpcId,
        TagSpecifications: [{ ResourceType: 'security-group', Tags: toTags({ [TAGS.name]: name, [TAGS.managedBy]: MANAGED_BY }) }],
      }),
    );
  } catch (e) {
    // Another ct process created it first.
    if (awsErrorName(e) !== 'InvalidGroup.Duplicate') throw cloudError(e, `creating security group ${name}`);
  }
  const group = await findGroup(ec2, name, vpcId);
  if (!group?.GroupId) throw new ConfigError(`security group ${name} could not be created in ${vpcId}`);
  return group;
}

function allowsSsh(group: SecurityGroup, cidr: string): boolean {
  return (group.IpPermissions ?? []).some(
    (p) =>
      (p.IpProtocol === '-1' || (p.IpProtocol === 'tcp' && (p.FromPort ?? 0) <= 22 && (p.ToPort ?? 0) >= 22)) &&
      [...(p.IpRanges ?? []).map((r) => r.CidrIp), ...(p.Ipv6Ranges ?? []).map((r) => r.CidrIpv6)].includes(cidr),
  );
}

/**
 * The security group instances are launched in, created when missing, with an inbound rule
 * for SSH (port 22) from `cidr` added when missing. Rules of other callers stay: the group is
 * shared by everyone in the account who runs ct in this VPC.
 */
export async function ensureSshSecurityGroup(ec2: EC2Client, o: SshSecurityGroupOptions): Promise<string> {
  const group = await findOrCreateGroup(ec2, o.name, o.subnetId, 'SSH to ct EC2 sandboxes from the callers own address');
  if (!allowsSsh(group, o.cidr)) {
    const range = { Description: `ct SSH for ${o.launchedBy}`.replace(/[^A-Za-z0-9 ._\-:/()#,@[\]+=&;{}!$*]/g, '') };
    try {
      await ec2.send(
        new AuthorizeSecurityGroupIngressCommand({
          GroupId: group.GroupId,
          IpPermissions: [
            {
              IpProtocol: 'tcp',
              FromPort: 22,
              ToPort: 22,
              ...(o.ipVersion === 4 ? { IpRanges: [{ CidrIp: o.cidr, ...range }] } : { Ipv6Ranges: [{ CidrIpv6: o.cidr, ...range }] }),
            },
          ],
        }),
      );
    } catch (e) {
      if (awsErrorName(e) !== 'InvalidPermission.Duplicate') throw cloudError(e, `allowing SSH from ${o.cidr} in security group ${o.name}`);
    }
  }
  return group.GroupId!;
}

/**
 * A security group with no inbound rule (fleet workers only call out: SQS, S3, registries),
 * created when missing. An existing group of that name is used as it is.
 */
export async function ensureEgressOnlySecurityGroup(ec2: EC2Client, o: { name: string; subnetId?: string }): Promise<string> {
  return (await findOrCreateGroup(ec2, o.name, o.subnetId, 'ct fleet workers: outbound only, no inbound rule')).GroupId!;
}

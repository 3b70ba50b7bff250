/**
 * Seeds a moto account with what two users' ct runs leave in AWS, written directly with the AWS
 * SDK (as ct's launcher and controller would): live and finished fleets, orphaned workers,
 * sandboxes, an AMI builder, ct and non-ct security groups, and resources ct does not manage.
 */
import {
  AuthorizeSecurityGroupIngressCommand,
  CreateSecurityGroupCommand,
  DescribeImagesCommand,
  EC2Client,
  RunInstancesCommand,
  type Tag,
} from '@aws-sdk/client-ec2';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, SQSClient, SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { FAKE_AWS } from '../helpers/fleet.js';
import type { Moto } from '../helpers/moto.js';

export const BUCKET = 'lb-fleet-results-migrated';
export interface Keys {
  AWS_ACCESS_KEY_ID: string;
  AWS_SECRET_ACCESS_KEY: string;
  AWS_SESSION_TOKEN?: string;
}

/** An IAM user with an access key, made through moto's IAM query API (ct itself never calls IAM). */
export async function iamUser(moto: Moto, name: string): Promise<Keys> {
  const call = async (body: string) => {
    const r = await fetch(`${moto.url}/`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/x-www-form-urlencoded',
        Authorization: `AWS4-HMAC-SHA256 Credential=${FAKE_AWS.AWS_ACCESS_KEY_ID}/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0`,
      },
      body: `${body}&Version=2010-05-08`,
    });
    return r.text();
  };
  await call(`Action=CreateUser&UserName=${name}`);
  const xml = await call(`Action=CreateAccessKey&UserName=${name}`);
  const id = /<AccessKeyId>([^<]+)/.exec(xml)?.[1];
  const secret = /<SecretAccessKey>([^<]+)/.exec(xml)?.[1];
  if (!id || !secret) throw new Error(`moto did not make an access key: ${xml}`);
  return { AWS_ACCESS_KEY_ID: id, AWS_SECRET_ACCESS_KEY: secret };
}

/** Credentials of an SSO-style role session (`assumed-role/ROLE/SESSION`). */
export async function roleSession(moto: Moto, session: string): Promise<Keys> {
  const sts = new STSClient(clientConfig(moto));
  try {
    const r = await sts.send(new AssumeRoleCommand({ RoleArn: 'arn:aws:iam::123456789012:role/LinuxbenchFleet', RoleSessionName: session }));
    const c = r.Credentials!;
    return { AWS_ACCESS_KEY_ID: c.AccessKeyId!, AWS_SECRET_ACCESS_KEY: c.SecretAccessKey!, AWS_SESSION_TOKEN: c.SessionToken! };
  } finally {
    sts.destroy();
  }
}

export function clientConfig(moto: Moto) {
  return { region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } };
}

export interface Seeded {
  /** Instance ids by label. */
  instances: Record<string, string>;
  groups: Record<string, string>;
}

export interface FleetSeed {
  /** Jobs j0.. in the manifest (no manifest when absent). */
  jobs?: number;
  /** Results of j0.. stored. */
  results?: number;
  /** Messages on the work queue. */
  queued?: number;
  queueTags?: Record<string, string>;
  /** An ANTHROPIC_API_KEY parameter under /linuxbench/fleet/<id>/. */
  secret?: boolean;
}

/** One fleet as a controller and its workers leave it: queues, manifest, results, a worker log, a secret (the bucket must exist). */
export async function seedFleet(moto: Moto, id: string, o: FleetSeed): Promise<void> {
  const cfg = clientConfig(moto);
  const sqs = new SQSClient(cfg);
  const s3 = new S3Client({ ...cfg, forcePathStyle: true });
  const ssm = new SSMClient(cfg);
  try {
    const urls: string[] = [];
    for (const role of ['work', 'done', 'dlq']) {
      urls.push((await sqs.send(new CreateQueueCommand({ QueueName: `lb-fleet-${id}-${role}`, ...(o.queueTags ? { tags: o.queueTags } : {}) }))).QueueUrl!);
    }
    for (let i = 0; i < (o.queued ?? 0); i++) await sqs.send(new SendMessageCommand({ QueueUrl: urls[0], MessageBody: JSON.stringify({ job_id: `j${i}` }) }));
    if (o.jobs !== undefined) {
      const jobs = Array.from({ length: o.jobs }, (_, i) => ({ job_id: `j${i}` }));
      await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${id}/manifest.json`, Body: JSON.stringify({ fleet_id: id, jobs }) }));
    }
    for (let i = 0; i < (o.results ?? 0); i++) await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${id}/j${i}.eval`, Body: 'zip' }));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${id}/logs/w1-worker.log`, Body: 'log' }));
    if (o.secret) await ssm.send(new PutParameterCommand({ Name: `/linuxbench/fleet/${id}/ANTHROPIC_API_KEY`, Value: 'sk-fake', Type: 'SecureString' }));
  } finally {
    sqs.destroy();
    s3.destroy();
    ssm.destroy();
  }
}

const tags = (t: Record<string, string>): Tag[] => Object.entries(t).map(([Key, Value]) => ({ Key, Value }));

/**
 * alice: fleet `alive1` (2 workers, 3 queued jobs, 1 of 5 results), finished fleet `done1`
 * (1 worker, queues, a secret), an orphan worker of fleet `ghost1`, a sandbox, an AMI builder,
 * queues of fleet `tagged1` tagged LaunchedBy=alice. bob: finished fleet `bobdone` (1 worker),
 * orphan `bobghost`. Nobody: queues of fleet `nobody1`. carol (SSO session): a sandbox.
 * Not ct's: an instance tagged like a worker but without ManagedBy, an untagged instance and
 * security group, a queue named other-work.
 */
export async function seed(moto: Moto): Promise<Seeded> {
  const cfg = clientConfig(moto);
  const ec2 = new EC2Client(cfg);
  const sqs = new SQSClient(cfg);
  const s3 = new S3Client({ ...cfg, forcePathStyle: true });
  try {
    const image = (await ec2.send(new DescribeImagesCommand({}))).Images![0]!.ImageId!;
    const group = async (name: string, managed: boolean) =>
      (
        await ec2.send(
          new CreateSecurityGroupCommand({
            GroupName: name,
            Description: name,
            ...(managed ? { TagSpecifications: [{ ResourceType: 'security-group', Tags: tags({ ManagedBy: 'ct', Name: name }) }] } : {}),
          }),
        )
      ).GroupId!;
    const groups = {
      fleet: await group('linuxbench-fleet-worker-sg', true),
      eval: await group('linuxbench-eval-sg', true),
      unused: await group('linuxbench-old-sg', true),
      foreign: await group('someone-elses-sg', false),
    };
    await ec2.send(new AuthorizeSecurityGroupIngressCommand({ GroupId: groups.eval, IpPermissions: [{ IpProtocol: 'tcp', FromPort: 22, ToPort: 22, IpRanges: [{ CidrIp: '203.0.113.7/32' }] }] }));
    const instances: Record<string, string> = {};
    const launch = async (label: string, t: Record<string, string>, sg: string, o: { spot?: boolean; type?: string } = {}) => {
      const r = await ec2.send(
        new RunInstancesCommand({
          ImageId: image,
          InstanceType: (o.type ?? 'c7i.4xlarge') as never,
          MinCount: 1,
          MaxCount: 1,
          SecurityGroupIds: [sg],
          ...(o.spot ? { InstanceMarketOptions: { MarketType: 'spot' } } : {}),
          ...(Object.keys(t).length ? { TagSpecifications: [{ ResourceType: 'instance', Tags: tags(t) }] } : {}),
        }),
      );
      instances[label] = r.Instances![0]!.InstanceId!;
    };
    const worker = (fleet: string, by: string) => ({ FleetId: fleet, LaunchedBy: by, ManagedBy: 'ct', Name: `linuxbench-worker-${fleet}` });
    await launch('alive1-a', worker('alive1', 'alice'), groups.fleet, { spot: true });
    await launch('alive1-b', worker('alive1', 'alice'), groups.fleet);
    await launch('done1', worker('done1', 'alice'), groups.fleet);
    await launch('ghost1', worker('ghost1', 'alice'), groups.fleet);
    await launch('alice-sandbox', { Name: 'linuxbench-eval-r1', LaunchedBy: 'alice', ManagedBy: 'ct', 'ct:run-id': 'r1', 'ct:host': 'laptop' }, groups.eval, { type: 'm6i.xlarge' });
    await launch('alice-builder', { Name: 'linuxbench-ami-builder', LaunchedBy: 'alice', ManagedBy: 'ct', 'ct:role': 'ami-builder' }, groups.fleet, { type: 'c6i.2xlarge' });
    await launch('bobdone', worker('bobdone', 'bob'), groups.fleet);
    await launch('bobghost', worker('bobghost', 'bob'), groups.fleet);
    await launch('carol-sandbox', { Name: 'linuxbench-eval-r2', LaunchedBy: 'carol', ManagedBy: 'ct', 'ct:run-id': 'r2', 'ct:host': 'desk' }, groups.eval, { type: 't3.large' });
    await launch('unmanaged', { FleetId: 'ghost9', LaunchedBy: 'alice', Name: 'hand-made' }, groups.foreign);
    await launch('untagged', {}, groups.foreign);

    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const fleet = (id: string, o: FleetSeed) => seedFleet(moto, id, o);
    await fleet('alive1', { jobs: 5, results: 1, queued: 3, secret: true });
    await fleet('done1', { jobs: 2, results: 2, secret: true });
    await fleet('tagged1', { queueTags: { LaunchedBy: 'alice', ManagedBy: 'ct' } });
    await fleet('bobdone', { jobs: 1, results: 1, secret: true });
    await fleet('nobody1', {});
    await sqs.send(new CreateQueueCommand({ QueueName: 'other-work' }));
    return { instances, groups };
  } finally {
    ec2.destroy();
    sqs.destroy();
    s3.destroy();
  }
}

/**
 * ops/docs/fleet-iam-policy.json (and the worker role's policy) against what ct really calls:
 * every AWS call of an end-to-end fleet run (controller + local worker, moto and Docker), of an
 * `--ec2` fleet's controller (plan, security group, secrets, launch, and the terminate when it
 * stops: no instance boots on moto, so it stops for lack of progress) and of
 * `ct cloud put-docker-auth | status | cleanup --yes`, recorded by ct's own SDK middleware
 * (CT_AWS_CALL_LOG), must be allowed by the policy for an IAM user and for an SSO session, as
 * evaluated offline by @cloud-copilot/iam-simulate; so must the few calls moto cannot make and
 * those of `ct cloud build-ami`. A list of calls that must be denied (another user's instance, untagged
 * launches, retagging, other buckets, queues and parameters...) guards the scoping. A new AWS
 * call without a policy line (or without a mapping to its IAM action below) fails here.
 */
import assert from 'node:assert/strict';
import { CreateSecurityGroupCommand, DescribeImagesCommand, DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir } from '../helpers/fleet.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { seedEc2FleetWorld } from '../fleet/helpers/ec2-fleet-world.js';
import { git } from '../settings/helpers/git-fixtures.js';
import { ACCOUNT, decision, type Request, type Who } from './helpers/iam-decision.js';
import { clientConfig, iamUser, type Keys } from './seed.js';

const POLICY = JSON.parse(readFileSync(join(REPO_ROOT, 'ops', 'docs', 'fleet-iam-policy.json'), 'utf8'));
const WORKER_POLICY = JSON.parse(readFileSync(join(REPO_ROOT, 'ops', 'docs', 'fleet-worker-role-policy.json'), 'utf8'));
const REGION = 'us-east-1';
const BUCKET = 'lb-fleet-results-migrated';
const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const RUN = ['run', 'eval', '--fleet', '--workers', 'local:1', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '2', '--yes'];
/** Another fleet (one epoch: another fleet id) on EC2 workers, launched with the default worker AMI parameter. */
const EC2_RUN = ['run', 'eval', '--ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '1', '--yes'];
const WORKER_AMI_PARAMETER = '/linuxbench/worker-ami-id';

const IAM_USER: Who = { label: 'IAM user alice', principal: `arn:aws:iam::${ACCOUNT}:user/alice`, context: { 'aws:username': 'alice' } };
const SSO: Who = {
  label: 'SSO session alice',
  principal: `arn:aws:sts::${ACCOUNT}:assumed-role/AWSReservedSSO_LinuxbenchFleet_0123456789abcdef/alice`,
  context: { 'aws:PrincipalTag/LaunchedBy': 'alice' },
};
const WORKER: Who = { label: 'worker role', principal: `arn:aws:sts::${ACCOUNT}:assumed-role/linuxbench-worker/i-0abc`, context: {} };

const arn = {
  queue: (name: string) => `arn:aws:sqs:${REGION}:${ACCOUNT}:${name}`,
  object: (bucket: string, key: string) => `arn:aws:s3:::${bucket}/${key}`,
  bucket: (bucket: string) => `arn:aws:s3:::${bucket}`,
  parameter: (name: string) => `arn:aws:ssm:${REGION}:${ACCOUNT}:parameter${name.startsWith('/') ? '' : '/'}${name}`,
  ec2: (type: string, id: string) => `arn:aws:ec2:${REGION}:${ACCOUNT}:${type}/${id}`,
};

interface Recorded {
  ct: string;
  client: string;
  command: string;
  input: Record<string, unknown>;
}

/** Calls that need no permission (AWS answers them for any valid credentials). */
const NO_PERMISSION = new Set(['STSClient GetCallerIdentityCommand']);

/** IAM actions of S3 operations whose names differ (HeadObject is authorised as GetObject...). */
const S3_ACTIONS: Record<string, string> = {
  GetObject: 's3:GetObject',
  HeadObject: 's3:GetObject',
  PutObject: 's3:PutObject',
  DeleteObject: 's3:DeleteObject',
  DeleteObjects: 's3:DeleteObject',
  ListObjectsV2: 's3:ListBucket',
  HeadBucket: 's3:ListBucket',
  CreateBucket: 's3:CreateBucket',
};
const SQS_BATCH: Record<string, string> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

/** The IAM requests one recorded call needs; `tags` gives an EC2 resource's tags (as moto holds them). */
function requestsOf(c: Recorded, tags: (id: string) => Record<string, string>): Request[] {
  const op = c.command.replace(/Command$/, '');
  const i = c.input;
  const resourceTags = (id: string) => Object.fromEntries(Object.entries(tags(id)).map(([k, v]) => [`aws:ResourceTag/${k}`, v]));
  switch (c.client) {
    case 'SQSClient': {
      const action = `sqs:${SQS_BATCH[op] ?? op}`;
      if (op === 'ListQueues') return [{ action, resource: '*' }];
      const name = (i.QueueName as string | undefined) ?? String(i.QueueUrl).split('/').pop()!;
      return [{ action, resource: arn.queue(name) }];
    }
    case 'S3Client': {
      const action = S3_ACTIONS[op];
      assert.ok(action, `S3 ${op} has no IAM action in this test's table: add it here and a line to the policy`);
      if (op === 'DeleteObjects') return ((i.Delete as { Objects: Array<{ Key: string }> }).Objects ?? []).map((o) => ({ action, resource: arn.object(String(i.Bucket), o.Key) }));
      const conditional = i.IfNoneMatch !== undefined ? { context: { 's3:if-none-match': String(i.IfNoneMatch) } } : {};
      return [{ action, resource: i.Key !== undefined ? arn.object(String(i.Bucket), String(i.Key)) : arn.bucket(String(i.Bucket)), ...conditional }];
    }
    case 'SSMClient': {
      const names = (i.Names as string[] | undefined) ?? [String(i.Name ?? i.Path)];
      const out = names.map((n) => ({ action: `ssm:${op}`, resource: arn.parameter(n) }));
      if (op === 'PutParameter' && i.Tags) out.push({ action: 'ssm:AddTagsToResource', resource: arn.parameter(names[0]!) });
      return out;
    }
    case 'EC2Client': {
      const action = `ec2:${op}`;
      if (op.startsWith('Describe')) return [{ action, resource: '*' }];
      if (op === 'TerminateInstances') return (i.InstanceIds as string[]).map((id) => ({ action, resource: arn.ec2('instance', id), context: resourceTags(id) }));
      if (op === 'DeregisterImage') return [{ action, resource: `arn:aws:ec2:${REGION}::image/${String(i.ImageId)}`, context: resourceTags(String(i.ImageId)) }];
      if (op === 'DeleteSnapshot') return [{ action, resource: `arn:aws:ec2:${REGION}::snapshot/${String(i.SnapshotId)}` }];
      if (op === 'DeleteSecurityGroup') return [{ action, resource: arn.ec2('security-group', String(i.GroupId)), context: resourceTags(String(i.GroupId)) }];
      if (op === 'RunInstances') return runInstancesRequests(i);
      if (op === 'CreateSecurityGroup') {
        return [
          { action, resource: arn.ec2('security-group', '*'), context: requestTags(i, 'security-group') },
          { action, resource: arn.ec2('vpc', String(i.VpcId)) },
          { action: 'ec2:CreateTags', resource: arn.ec2('security-group', '*'), context: { 'ec2:CreateAction': 'CreateSecurityGroup' } },
        ];
      }
      assert.fail(`EC2 ${op} has no mapping in this test: add it (with its resources and condition keys) and a policy line`);
    }
    // falls through: assert.fail throws
    case 'IAMClient': {
      if (op === 'GetInstanceProfile') return [{ action: `iam:${op}`, resource: `arn:aws:iam::${ACCOUNT}:instance-profile/${String(i.InstanceProfileName)}` }];
      assert.fail(`IAM ${op} has no mapping in this test: add it and a policy line`);
    }
    // falls through: assert.fail throws
    default:
      assert.fail(`${c.client} ${op} has no mapping in this test: add it and a policy line`);
  }
}

/** The tags a call puts on the resources of `type` it creates, as IAM request-tag keys. */
function requestTags(i: Record<string, unknown>, type: string): Record<string, string> {
  const specs = (i.TagSpecifications as Array<{ ResourceType: string; Tags?: Array<{ Key: string; Value: string }> }> | undefined) ?? [];
  return Object.fromEntries((specs.find((x) => x.ResourceType === type)?.Tags ?? []).map((t) => [`aws:RequestTag/${t.Key}`, t.Value]));
}

/**
 * What IAM authorises for one RunInstances: the instance and its volume it creates (each with the
 * tags the request gives it), the resources it uses (image, security groups, subnet, network
 * interface, a spot request), tagging at creation, and passing the instance profile's role (named
 * as the profile, as ops/docs sets them up).
 */
function runInstancesRequests(i: Record<string, unknown>): Request[] {
  const action = 'ec2:RunInstances';
  const tagged = ((i.TagSpecifications as Array<{ ResourceType: string }> | undefined) ?? []).map((x) => x.ResourceType);
  const out: Request[] = [
    ...['instance', 'volume'].map((type) => ({ action, resource: arn.ec2(type, '*'), context: requestTags(i, type) })),
    ...tagged.map((type) => ({ action: 'ec2:CreateTags', resource: arn.ec2(type, '*'), context: { 'ec2:CreateAction': 'RunInstances' } })),
    { action, resource: `arn:aws:ec2:${REGION}::image/${String(i.ImageId)}` },
    ...((i.SecurityGroupIds as string[] | undefined) ?? []).map((g) => ({ action, resource: arn.ec2('security-group', g) })),
    { action, resource: arn.ec2('subnet', String(i.SubnetId ?? '*')) },
    { action, resource: arn.ec2('network-interface', '*') },
  ];
  if ((i.InstanceMarketOptions as { MarketType?: string } | undefined)?.MarketType === 'spot') out.push({ action, resource: arn.ec2('spot-instances-request', '*') });
  const profile = (i.IamInstanceProfile as { Name?: string } | undefined)?.Name;
  if (profile) out.push({ action: 'iam:PassRole', resource: `arn:aws:iam::${ACCOUNT}:role/${profile}`, context: { 'iam:PassedToService': 'ec2.amazonaws.com' } });
  return out;
}

/**
 * Calls ct makes that moto cannot answer, so the recording lacks them: reading the public
 * parameter of the stock Ubuntu AMI (the launch's fallback when no worker AMI is built; moto
 * holds no such parameter and refuses to store names under /aws/).
 */
const UNRECORDABLE: Request[] = [{ action: 'ssm:GetParameter', resource: arn.parameter('/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id') }];

/**
 * What `ct cloud build-ami` asks of AWS beyond the launcher's calls (its RunInstances is the
 * launcher's with ct:role=ami-builder): the bucket, the builder's log and markers, CreateImage of
 * the stopped builder (authorised on the instance, the new image and its snapshot), the AMI
 * parameter, and removing the previous AMI and its snapshots.
 */
function amiBuildCalls(launchedBy: string): Request[] {
  const own = { 'aws:ResourceTag/LaunchedBy': launchedBy, 'aws:ResourceTag/ManagedBy': 'ct' };
  const tagged = { 'aws:RequestTag/LaunchedBy': launchedBy, 'aws:RequestTag/ManagedBy': 'ct', 'aws:RequestTag/ct:role': 'ami-builder', 'aws:RequestTag/Name': 'linuxbench-ami-builder-b0' };
  return [
    { action: 's3:ListBucket', resource: arn.bucket(BUCKET) },
    { action: 's3:PutObject', resource: arn.object(BUCKET, 'ami-builds/b0/package-lock.json') },
    { action: 's3:GetObject', resource: arn.object(BUCKET, 'ami-builds/b0/build.log') },
    { action: 's3:GetObject', resource: arn.object(BUCKET, 'ami-builds/b0/done') },
    { action: 'ec2:RunInstances', resource: arn.ec2('instance', '*'), context: tagged },
    { action: 'ec2:DescribeImages', resource: '*' },
    { action: 'ec2:CreateImage', resource: arn.ec2('instance', 'i-0builder'), context: own },
    { action: 'ec2:CreateImage', resource: `arn:aws:ec2:${REGION}::image/*`, context: { 'aws:RequestTag/ManagedBy': 'ct', 'aws:RequestTag/LaunchedBy': launchedBy } },
    { action: 'ec2:CreateImage', resource: `arn:aws:ec2:${REGION}::snapshot/*` },
    { action: 'ec2:CreateTags', resource: `arn:aws:ec2:${REGION}::image/ami-0new`, context: { 'ec2:CreateAction': 'CreateImage' } },
    { action: 'ssm:GetParameter', resource: arn.parameter('/linuxbench/worker-ami-id') },
    { action: 'ssm:PutParameter', resource: arn.parameter('/linuxbench/worker-ami-id') },
    { action: 'ec2:DeregisterImage', resource: `arn:aws:ec2:${REGION}::image/ami-0old`, context: { 'aws:ResourceTag/ManagedBy': 'ct' } },
    { action: 'ec2:DeleteSnapshot', resource: `arn:aws:ec2:${REGION}::snapshot/snap-0old` },
    { action: 'ec2:TerminateInstances', resource: arn.ec2('instance', 'i-0builder'), context: own },
  ];
}

/** Calls the scoped policy must refuse, each with why. */
const DENIED: Array<Request & { why: string; as?: Who }> = [
  { why: "terminate another user's instance", action: 'ec2:TerminateInstances', resource: arn.ec2('instance', 'i-bob'), context: { 'aws:ResourceTag/LaunchedBy': 'bob', 'aws:ResourceTag/ManagedBy': 'ct' } },
  { why: 'terminate an untagged instance', action: 'ec2:TerminateInstances', resource: arn.ec2('instance', 'i-untagged') },
  { why: 'terminate an instance ct does not manage', action: 'ec2:TerminateInstances', resource: arn.ec2('instance', 'i-hand'), context: { 'aws:ResourceTag/LaunchedBy': 'alice' } },
  { why: 'stop own instance (not needed)', action: 'ec2:StopInstances', resource: arn.ec2('instance', 'i-own'), context: { 'aws:ResourceTag/LaunchedBy': 'alice', 'aws:ResourceTag/ManagedBy': 'ct' } },
  { why: 'RunInstances without tags', action: 'ec2:RunInstances', resource: arn.ec2('instance', '*') },
  { why: 'RunInstances tagged as another user', action: 'ec2:RunInstances', resource: arn.ec2('instance', '*'), context: { 'aws:RequestTag/LaunchedBy': 'bob', 'aws:RequestTag/ManagedBy': 'ct' } },
  { why: 'RunInstances without ManagedBy', action: 'ec2:RunInstances', resource: arn.ec2('instance', '*'), context: { 'aws:RequestTag/LaunchedBy': 'alice' } },
  { why: 'RunInstances with another ManagedBy', action: 'ec2:RunInstances', resource: arn.ec2('instance', '*'), context: { 'aws:RequestTag/LaunchedBy': 'alice', 'aws:RequestTag/ManagedBy': 'terraform' } },
  { why: 'RunInstances volume without tags', action: 'ec2:RunInstances', resource: arn.ec2('volume', '*') },
  { why: "retag another user's instance to take it over", action: 'ec2:CreateTags', resource: arn.ec2('instance', 'i-bob'), context: { 'aws:ResourceTag/LaunchedBy': 'bob', 'aws:RequestTag/LaunchedBy': 'alice' } },
  { why: 'retag own instance after launch', action: 'ec2:CreateTags', resource: arn.ec2('instance', 'i-own'), context: { 'aws:ResourceTag/LaunchedBy': 'alice' } },
  { why: 'tag an instance claiming a launch that is not one', action: 'ec2:CreateTags', resource: arn.ec2('instance', 'i-bob'), context: { 'ec2:CreateAction': 'CreateImage' } },
  { why: 'image an instance of another user', action: 'ec2:CreateImage', resource: arn.ec2('instance', 'i-bob'), context: { 'aws:ResourceTag/LaunchedBy': 'bob', 'aws:ResourceTag/ManagedBy': 'ct' } },
  { why: 'create an image not tagged ManagedBy=ct', action: 'ec2:CreateImage', resource: `arn:aws:ec2:${REGION}::image/*` },
  { why: 'deregister an image ct did not make', action: 'ec2:DeregisterImage', resource: `arn:aws:ec2:${REGION}::image/ami-prod`, context: { 'aws:ResourceTag/ManagedBy': 'packer' } },
  { why: 'retag an existing image', action: 'ec2:CreateTags', resource: `arn:aws:ec2:${REGION}::image/ami-prod`, context: { 'aws:RequestTag/ManagedBy': 'ct' } },
  { why: 'the worker role images an instance', as: WORKER, action: 'ec2:CreateImage', resource: arn.ec2('instance', 'i-0own') },
  { why: 'delete tags', action: 'ec2:DeleteTags', resource: arn.ec2('instance', 'i-bob') },
  { why: 'delete a security group ct does not manage', action: 'ec2:DeleteSecurityGroup', resource: arn.ec2('security-group', 'sg-prod') },
  { why: 'open a security group ct does not manage', action: 'ec2:AuthorizeSecurityGroupIngress', resource: arn.ec2('security-group', 'sg-prod'), context: { 'aws:ResourceTag/ManagedBy': 'prod' } },
  { why: 'create an untagged security group', action: 'ec2:CreateSecurityGroup', resource: arn.ec2('security-group', '*') },
  { why: 'read another bucket', action: 's3:GetObject', resource: arn.object('company-secrets', 'payroll.csv') },
  { why: 'write another bucket', action: 's3:PutObject', resource: arn.object('lb-fleet-results-migrated-copy', 'x.eval') },
  { why: 'list another bucket', action: 's3:ListBucket', resource: arn.bucket('company-secrets') },
  { why: 'delete the fleet bucket', action: 's3:DeleteBucket', resource: arn.bucket(BUCKET) },
  { why: "change the fleet bucket's policy", action: 's3:PutBucketPolicy', resource: arn.bucket(BUCKET) },
  { why: 'send to a queue outside lb-fleet-*', action: 'sqs:SendMessage', resource: arn.queue('orders-work') },
  { why: 'create a queue outside lb-fleet-*', action: 'sqs:CreateQueue', resource: arn.queue('lb-other-work') },
  { why: 'delete a queue outside lb-fleet-*', action: 'sqs:DeleteQueue', resource: arn.queue('prod-events') },
  { why: 'change a fleet queue policy', action: 'sqs:AddPermission', resource: arn.queue('lb-fleet-x-work') },
  { why: 'read a parameter outside /linuxbench/', action: 'ssm:GetParameter', resource: arn.parameter('/prod/db-password') },
  { why: 'write a parameter outside /linuxbench/', action: 'ssm:PutParameter', resource: arn.parameter('/prod/db-password') },
  { why: "read a parameter under /linuxbench/ that is not ct's", action: 'ssm:GetParameter', resource: arn.parameter('/linuxbench/prod-db-password') },
  { why: 'pass an admin role', action: 'iam:PassRole', resource: `arn:aws:iam::${ACCOUNT}:role/Admin`, context: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
  { why: 'pass the worker role to Lambda', action: 'iam:PassRole', resource: `arn:aws:iam::${ACCOUNT}:role/linuxbench-worker`, context: { 'iam:PassedToService': 'lambda.amazonaws.com' } },
  { why: 'create an IAM user', action: 'iam:CreateUser', resource: `arn:aws:iam::${ACCOUNT}:user/mallory` },
  { why: 'read an instance profile other than the workers\'', action: 'iam:GetInstanceProfile', resource: `arn:aws:iam::${ACCOUNT}:instance-profile/Admin` },
  { why: 'SSO session without the LaunchedBy tag launches', as: { ...SSO, context: {} }, action: 'ec2:RunInstances', resource: arn.ec2('instance', '*'), context: { 'aws:RequestTag/LaunchedBy': 'alice', 'aws:RequestTag/ManagedBy': 'ct' } },
  {
    why: "SSO session terminates another user's instance",
    as: { ...SSO, principal: SSO.principal.replace(/alice$/, 'carol'), context: { 'aws:PrincipalTag/LaunchedBy': 'carol' } },
    action: 'ec2:TerminateInstances',
    resource: arn.ec2('instance', 'i-alice'),
    context: { 'aws:ResourceTag/LaunchedBy': 'alice', 'aws:ResourceTag/ManagedBy': 'ct' },
  },
  { why: 'worker role terminates an instance', as: WORKER, action: 'ec2:TerminateInstances', resource: arn.ec2('instance', 'i-0own') },
  { why: 'worker role deletes a fleet queue', as: WORKER, action: 'sqs:DeleteQueue', resource: arn.queue('lb-fleet-x-work') },
  { why: 'worker role writes a parameter', as: WORKER, action: 'ssm:PutParameter', resource: arn.parameter('/linuxbench/worker-ami-id') },
  { why: 'worker role deletes results', as: WORKER, action: 's3:DeleteObject', resource: arn.object(BUCKET, 'f0/j1.eval') },
  { why: 'worker role overwrites a result (no If-None-Match)', as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'f0/j1.eval') },
  { why: "worker role writes a monitor job's input", as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'f0/inputs/j1.eval'), context: { 's3:if-none-match': '*' } },
  { why: 'worker role writes a manifest', as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'f0/manifest.json'), context: { 's3:if-none-match': '*' } },
  { why: "worker role writes the fleet's queue ledger", as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'f0/queue-ledger.json') },
  { why: 'worker role writes a code artifact', as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'artifacts/abc.tar.gz') },
  { why: 'worker role writes a dead-job marker', as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'f0/errors/dead/j1.json') },
  { why: 'worker role writes elsewhere in the bucket', as: WORKER, action: 's3:PutObject', resource: arn.object(BUCKET, 'f0/other.json') },
  { why: "worker role reads a parameter that is neither a fleet secret nor the registry's", as: WORKER, action: 'ssm:GetParameter', resource: arn.parameter('/linuxbench/other') },
  {
    why: 'worker role decrypts with a KMS key (aws/ssm needs no grant; a customer key is added with --kms-key)',
    as: WORKER,
    action: 'kms:Decrypt',
    resource: `arn:aws:kms:${REGION}:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`,
    context: { 'kms:ViaService': `ssm.${REGION}.amazonaws.com` },
  },
];

describe('fleet IAM policy', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let calls: Recorded[] = [];
  let ec2Tags = new Map<string, Record<string, string>>();

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('iam');
    const alice: Keys = await iamUser(moto, 'alice');
    const log = join(dirs.work, 'aws-calls.jsonl');
    writeFileSync(log, '');
    const env = { ...fleetEnv(moto, dirs, { ...alice, CT_AWS_CALL_LOG: log, DOCKER_ORG_NAME: 'acme', DOCKER_ORG_PAT: 'dckr_pat_FAKE' }) };

    // An end-to-end fleet: controller and a local worker, 2 jobs in Docker.
    const run = await runCt([...RUN, '--log-dir', testLogDir('iam-fleet')], { cwd: dirs.work, env, timeoutMs: 240_000 });
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);

    // An --ec2 fleet as alice. No instance boots on moto: with no progress it stops and terminates its worker.
    // Workers elsewhere pull settings by repository and commit: the example setting becomes a registered repository.
    const demo = join(dirs.settings, 'demo');
    git(demo, 'init', '-q', '-b', 'main');
    git(demo, 'add', '-A');
    git(demo, 'commit', '-q', '-m', 'demo setting');
    writeFileSync(join(dirs.work, 'ct.config.yml'), `settings:\n  demo:\n    repo: ${demo}\n`);
    await seedEc2FleetWorld(moto.url, { workerAmi: true, workerParameter: WORKER_AMI_PARAMETER });
    const stale = { CT_FLEET_STALE_WARNING_MINUTES: '0.04', CT_FLEET_STALE_TEARDOWN_MINUTES: '0.1' };
    const ec2Run = await runCt([...EC2_RUN, '--log-dir', testLogDir('iam-ec2-fleet')], { cwd: dirs.work, env: { ...env, ...stale }, timeoutMs: 180_000 });
    assert.equal(ec2Run.code, 1, `${ec2Run.stdout}\n${ec2Run.stderr}`);
    assert.match(ec2Run.stderr, /launched 1 c7i\.4xlarge spot instance\(s\)/);
    assert.match(ec2Run.stderr, /stopped: no progress/);

    // Leftovers of alice's for cleanup to remove: an orphan worker, a finished fleet's queue, an unused group.
    const ec2 = new EC2Client(clientConfig(moto));
    const sqs = new SQSClient(clientConfig(moto));
    try {
      const image = (await ec2.send(new DescribeImagesCommand({}))).Images![0]!.ImageId!;
      const tags = { FleetId: 'orphan0', LaunchedBy: 'alice', ManagedBy: 'ct' };
      await ec2.send(
        new RunInstancesCommand({ ImageId: image, InstanceType: 't3.micro', MinCount: 1, MaxCount: 1, TagSpecifications: [{ ResourceType: 'instance', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) }] }),
      );
      await ec2.send(new CreateSecurityGroupCommand({ GroupName: 'linuxbench-old-sg', Description: 'old', TagSpecifications: [{ ResourceType: 'security-group', Tags: [{ Key: 'ManagedBy', Value: 'ct' }] }] }));
      await sqs.send(new CreateQueueCommand({ QueueName: 'lb-fleet-gone0-work', tags: { LaunchedBy: 'alice' } }));
      // Their tags now, for the IAM condition keys (cleanup deletes the group).
      const r = await ec2.send(new DescribeInstancesCommand({}));
      for (const i of (r.Reservations ?? []).flatMap((x) => x.Instances ?? [])) ec2Tags.set(i.InstanceId!, Object.fromEntries((i.Tags ?? []).map((t) => [t.Key!, t.Value!])));
      for (const g of (await ec2.send(new DescribeSecurityGroupsCommand({}))).SecurityGroups ?? []) ec2Tags.set(g.GroupId!, Object.fromEntries((g.Tags ?? []).map((t) => [t.Key!, t.Value!])));
    } finally {
      sqs.destroy();
      ec2.destroy();
    }
    for (const args of [['cloud', 'put-docker-auth'], ['cloud', 'status'], ['cloud', 'cleanup', '--yes']]) {
      const r = await runCt(args, { cwd: dirs.work, env, timeoutMs: 60_000 });
      assert.equal(r.code, 0, `ct ${args.join(' ')}: ${r.stderr}`);
    }
    calls = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Recorded);
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('the recording covers the controller, the worker and the cloud commands', () => {
    const seen = new Set(calls.map((c) => `${c.ct}: ${c.client} ${c.command}`));
    for (const expected of [
      'run eval: SQSClient CreateQueueCommand',
      'run eval: S3Client PutObjectCommand',
      'fleet worker: SQSClient ReceiveMessageCommand',
      'fleet worker: SQSClient DeleteMessageCommand',
      'fleet worker: S3Client PutObjectCommand',
      'run eval: EC2Client DescribeInstanceTypesCommand',
      'run eval: SSMClient GetParameterCommand',
      'run eval: EC2Client CreateSecurityGroupCommand',
      'run eval: SSMClient PutParameterCommand',
      'run eval: EC2Client RunInstancesCommand',
      'run eval: EC2Client DescribeInstancesCommand',
      'run eval: EC2Client TerminateInstancesCommand',
      'cloud put-docker-auth: SSMClient PutParameterCommand',
      'cloud cleanup: EC2Client TerminateInstancesCommand',
      'cloud cleanup: SQSClient DeleteQueueCommand',
      'cloud cleanup: EC2Client DeleteSecurityGroupCommand',
    ]) {
      assert.ok(seen.has(expected), `${expected} not recorded; recorded: ${[...seen].sort().join(', ')}`);
    }
    assert.doesNotMatch(JSON.stringify(calls), /dckr_pat_FAKE/, 'no secret value in the recording');
  });

  for (const who of [IAM_USER, SSO]) {
    test(`every recorded call is allowed for the ${who.label}`, async () => {
      const refused: string[] = [];
      const done = new Set<string>();
      for (const c of calls) {
        if (NO_PERMISSION.has(`${c.client} ${c.command}`)) continue;
        for (const r of requestsOf(c, (id) => ec2Tags.get(id) ?? {})) {
          const key = JSON.stringify(r);
          if (done.has(key)) continue;
          done.add(key);
          const d = await decision(POLICY, who, r);
          if (d !== 'Allowed') refused.push(`${c.ct}: ${r.action} on ${r.resource} ${JSON.stringify(r.context ?? {})} -> ${d}`);
        }
      }
      assert.ok(done.size >= 15, `only ${done.size} distinct requests recorded`);
      assert.deepEqual(refused, []);
    });

    test(`the calls moto cannot record are allowed for the ${who.label}`, async () => {
      for (const r of UNRECORDABLE) assert.equal(await decision(POLICY, who, r), 'Allowed', `${r.action} on ${r.resource}`);
    });

    test(`the AMI build's calls are allowed for the ${who.label}`, async () => {
      for (const r of amiBuildCalls('alice')) assert.equal(await decision(POLICY, who, r), 'Allowed', `${r.action} on ${r.resource}`);
    });
  }

  test("every call the worker made is allowed by the worker role's policy", async () => {
    const refused: string[] = [];
    for (const c of calls.filter((x) => x.ct === 'fleet worker' && !NO_PERMISSION.has(`${x.client} ${x.command}`))) {
      for (const r of requestsOf(c, () => ({}))) {
        const d = await decision(WORKER_POLICY, WORKER, r);
        if (d !== 'Allowed') refused.push(`${r.action} on ${r.resource} -> ${d}`);
      }
    }
    assert.deepEqual(refused, []);
  });

  test(`${DENIED.length} calls outside the fleet's scope are denied`, async () => {
    assert.ok(DENIED.length >= 20);
    const allowed: string[] = [];
    for (const d of DENIED) {
      const whos = d.as ? [d.as] : [IAM_USER, SSO];
      for (const who of whos) {
        const policy = who === WORKER ? WORKER_POLICY : POLICY;
        const got = await decision(policy, who, d);
        assert.doesNotMatch(got, /^error/, `${d.why}: ${got}`);
        if (got === 'Allowed') allowed.push(`${who.label}: ${d.why}`);
      }
    }
    assert.deepEqual(allowed, []);
  });

  test('the policy names no account and fits a managed policy (6,144 characters without whitespace)', () => {
    const text = readFileSync(join(REPO_ROOT, 'ops', 'docs', 'fleet-iam-policy.json'), 'utf8');
    assert.doesNotMatch(text, /\d{12}/);
    assert.ok(text.replace(/\s/g, '').length <= 6144, `${text.replace(/\s/g, '').length} characters`);
  });
});

/**
 * The IAM policies a fleet needs, rendered from the config so nobody edits JSON by hand:
 *
 * - `user`: for the people who run `ct run eval --ec2`, `--sandbox ec2` and `ct cloud` (IAM users
 *   through `${aws:username}`, SSO sessions through the `LaunchedBy` principal tag);
 * - `worker`: the worker role's (fleet workers and the AMI builder run with its instance profile);
 * - `worker-trust`: the worker role's trust policy (EC2 may assume it).
 *
 * Names come from the config: the bucket (`fleet.bucket`), the queue prefix
 * (`fleet.queue_prefix`), the secrets path (`fleet.secrets_prefix`), the SSM parameters
 * (`fleet.ami_parameter`, `fleet.docker_org_name_parameter`, `fleet.docker_org_pat_parameter`,
 * `ec2.ami_parameter`) and the worker role, named like its instance profile
 * (`fleet.instance_profile`). ops/docs/*.json are the renderings of the default config.
 *
 * No kms:Decrypt by default: every SecureString ct stores uses the AWS-managed key `aws/ssm`,
 * whose key policy lets any principal of the account use it through SSM. Registry credentials
 * stored under a customer-managed key need `kmsKey` on the worker's policy.
 */
import type { Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { MANAGED_BY, TAGS } from './tags.js';

/** Which policy to render. */
export const POLICY_ROLES = ['user', 'worker', 'worker-trust'] as const;
export type PolicyRole = (typeof POLICY_ROLES)[number];

export interface PolicyStatement {
  Sid?: string;
  Effect: 'Allow' | 'Deny';
  Principal?: Record<string, string>;
  Action: string | string[];
  Resource?: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}

export interface PolicyDocument {
  Version: '2012-10-17';
  Statement: PolicyStatement[];
}

/** The names a policy scopes to, as compiled from the config. */
export interface FleetPolicyNames {
  bucket: string;
  queuePrefix: string;
  /** `fleet.secrets_prefix`: a fleet's secrets are `<prefix><fleet id>/NAME`. */
  secretsPrefix: string;
  /** SSM parameters ct writes or reads besides the secrets: worker AMI id, registry name and PAT. */
  amiParameter: string;
  dockerNameParameter: string;
  dockerPatParameter: string;
  /** The public parameter holding stock Ubuntu's AMI id (`ec2.ami_parameter`). */
  ubuntuParameter: string;
  /** The worker role, named like its instance profile. */
  workerRole: string;
  /** A customer-managed KMS key (ARN) registry credentials are encrypted with; worker policy only. */
  kmsKey?: string;
}

/** A key ARN: IAM authorises kms:Decrypt on the key, so an alias ARN would match nothing. */
const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;

/** The names of `config` (its `fleet` and `ec2` sections), with an optional customer-managed key. */
export function policyNames(config: Pick<Config, 'fleet' | 'ec2'>, o: { kmsKey?: string } = {}): FleetPolicyNames {
  const f = config.fleet;
  if (o.kmsKey !== undefined && !KMS_KEY_ARN.test(o.kmsKey)) {
    throw new ConfigError(`--kms-key ${o.kmsKey}: expected a key ARN (arn:aws:kms:REGION:ACCOUNT:key/KEY-ID); an alias does not authorise kms:Decrypt`);
  }
  return {
    bucket: f.bucket,
    queuePrefix: f.queue_prefix,
    secretsPrefix: f.secrets_prefix,
    amiParameter: f.ami_parameter,
    dockerNameParameter: f.docker_org_name_parameter,
    dockerPatParameter: f.docker_org_pat_parameter,
    ubuntuParameter: config.ec2.ami_parameter,
    workerRole: f.instance_profile,
    ...(o.kmsKey !== undefined ? { kmsKey: o.kmsKey } : {}),
  };
}

/** The policy of `role` for `names`. */
export function fleetPolicy(role: PolicyRole, names: FleetPolicyNames): PolicyDocument {
  if (names.kmsKey !== undefined && role !== 'worker') {
    throw new ConfigError('--kms-key adds kms:Decrypt to the worker role, which reads the registry credentials; use it with --role worker');
  }
  if (role === 'user') return userPolicy(names);
  if (role === 'worker') return workerPolicy(names);
  return workerTrustPolicy();
}

/** JSON as `aws iam ... file://` takes it and ops/docs holds it: two-space indent, a final newline. */
export function renderPolicy(doc: PolicyDocument): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

const arn = {
  queues: (n: FleetPolicyNames) => `arn:aws:sqs:*:*:${n.queuePrefix}*`,
  bucket: (n: FleetPolicyNames) => `arn:aws:s3:::${n.bucket}`,
  objects: (n: FleetPolicyNames) => `arn:aws:s3:::${n.bucket}/*`,
  // A parameter's ARN has one slash before its name, whether or not the name starts with one.
  parameter: (name: string) => `arn:aws:ssm:*:*:parameter/${name.replace(/^\//, '')}`,
};

/** Everything under the secrets path, as fleetSecretsPath (src/fleet/secrets.ts) builds it. */
function secretsResource(n: FleetPolicyNames): string {
  const p = n.secretsPrefix.endsWith('/') ? n.secretsPrefix : `${n.secretsPrefix}/`;
  return arn.parameter(`${p}*`);
}

const unique = (xs: string[]) => [...new Set(xs)];

function userPolicy(n: FleetPolicyNames): PolicyDocument {
  const tagged = (key: 'RequestTag' | 'ResourceTag', launchedBy: string) => ({
    StringEquals: { [`aws:${key}/${TAGS.launchedBy}`]: launchedBy, [`aws:${key}/${TAGS.managedBy}`]: MANAGED_BY },
  });
  // IAM users are named by ${aws:username}; SSO sessions have none, so their LaunchedBy principal tag stands in.
  const IAM_USER = '${aws:username}';
  const SSO = `\${aws:PrincipalTag/${TAGS.launchedBy}}`;
  const ownInstances = ['ec2:TerminateInstances', 'ec2:CreateImage', 'ec2-instance-connect:SendSSHPublicKey'];
  const launched = ['arn:aws:ec2:*:*:instance/*', 'arn:aws:ec2:*:*:volume/*'];
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'ReadOnly',
        Effect: 'Allow',
        Action: [
          'ec2:DescribeInstances',
          'ec2:DescribeInstanceTypes',
          'ec2:DescribeInstanceAttribute',
          'ec2:DescribeSecurityGroups',
          'ec2:DescribeImages',
          'ec2:DescribeVpcs',
          'ec2:DescribeSubnets',
          'ec2:DescribeSpotPriceHistory',
          'sqs:ListQueues',
        ],
        Resource: '*',
      },
      { Sid: 'RunInstancesTaggedUser', Effect: 'Allow', Action: 'ec2:RunInstances', Resource: launched, Condition: tagged('RequestTag', IAM_USER) },
      { Sid: 'RunInstancesTaggedSso', Effect: 'Allow', Action: 'ec2:RunInstances', Resource: launched, Condition: tagged('RequestTag', SSO) },
      {
        Sid: 'RunInstancesOtherResources',
        Effect: 'Allow',
        Action: 'ec2:RunInstances',
        Resource: [
          'arn:aws:ec2:*::image/*',
          'arn:aws:ec2:*:*:image/*',
          'arn:aws:ec2:*:*:subnet/*',
          'arn:aws:ec2:*:*:network-interface/*',
          'arn:aws:ec2:*:*:security-group/*',
          'arn:aws:ec2:*:*:key-pair/*',
          'arn:aws:ec2:*:*:spot-instances-request/*',
        ],
      },
      {
        Sid: 'TagOnlyAtCreation',
        Effect: 'Allow',
        Action: 'ec2:CreateTags',
        Resource: ['arn:aws:ec2:*:*:instance/*', 'arn:aws:ec2:*:*:volume/*', 'arn:aws:ec2:*:*:spot-instances-request/*', 'arn:aws:ec2:*:*:security-group/*'],
        Condition: { StringEquals: { 'ec2:CreateAction': ['RunInstances', 'CreateSecurityGroup'] } },
      },
      {
        Sid: 'CreateCtSecurityGroup',
        Effect: 'Allow',
        Action: 'ec2:CreateSecurityGroup',
        Resource: 'arn:aws:ec2:*:*:security-group/*',
        Condition: { StringEquals: { [`aws:RequestTag/${TAGS.managedBy}`]: MANAGED_BY } },
      },
      { Sid: 'CreateSecurityGroupInVpc', Effect: 'Allow', Action: 'ec2:CreateSecurityGroup', Resource: 'arn:aws:ec2:*:*:vpc/*' },
      {
        Sid: 'ManageCtSecurityGroups',
        Effect: 'Allow',
        Action: ['ec2:AuthorizeSecurityGroupIngress', 'ec2:DeleteSecurityGroup'],
        Resource: 'arn:aws:ec2:*:*:security-group/*',
        Condition: { StringEquals: { [`aws:ResourceTag/${TAGS.managedBy}`]: MANAGED_BY } },
      },
      { Sid: 'OwnInstancesUser', Effect: 'Allow', Action: ownInstances, Resource: 'arn:aws:ec2:*:*:instance/*', Condition: tagged('ResourceTag', IAM_USER) },
      { Sid: 'OwnInstancesSso', Effect: 'Allow', Action: ownInstances, Resource: 'arn:aws:ec2:*:*:instance/*', Condition: tagged('ResourceTag', SSO) },
      {
        Sid: 'WorkerAmiCreate',
        Effect: 'Allow',
        Action: 'ec2:CreateImage',
        Resource: 'arn:aws:ec2:*::image/*',
        Condition: { StringEquals: { [`aws:RequestTag/${TAGS.managedBy}`]: MANAGED_BY } },
      },
      // CreateImage's snapshots carry no tag to scope by.
      { Sid: 'WorkerAmiSnapshots', Effect: 'Allow', Action: ['ec2:CreateImage', 'ec2:DeleteSnapshot'], Resource: 'arn:aws:ec2:*::snapshot/*' },
      {
        Sid: 'WorkerAmiTagAtCreation',
        Effect: 'Allow',
        Action: 'ec2:CreateTags',
        Resource: 'arn:aws:ec2:*::image/*',
        Condition: { StringEquals: { 'ec2:CreateAction': 'CreateImage' } },
      },
      {
        Sid: 'WorkerAmiDeregister',
        Effect: 'Allow',
        Action: 'ec2:DeregisterImage',
        Resource: 'arn:aws:ec2:*::image/*',
        Condition: { StringEquals: { [`aws:ResourceTag/${TAGS.managedBy}`]: MANAGED_BY } },
      },
      {
        Sid: 'FleetQueues',
        Effect: 'Allow',
        Action: [
          'sqs:CreateQueue',
          'sqs:DeleteQueue',
          'sqs:GetQueueUrl',
          'sqs:GetQueueAttributes',
          'sqs:SetQueueAttributes',
          'sqs:ListQueueTags',
          'sqs:TagQueue',
          'sqs:SendMessage',
          'sqs:ReceiveMessage',
          'sqs:DeleteMessage',
          'sqs:ChangeMessageVisibility',
          'sqs:PurgeQueue',
        ],
        Resource: arn.queues(n),
      },
      { Sid: 'FleetBucket', Effect: 'Allow', Action: ['s3:ListBucket', 's3:CreateBucket'], Resource: arn.bucket(n) },
      { Sid: 'FleetObjects', Effect: 'Allow', Action: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'], Resource: arn.objects(n) },
      {
        Sid: 'FleetParameters',
        Effect: 'Allow',
        Action: [
          'ssm:GetParameter',
          'ssm:GetParameters',
          'ssm:GetParametersByPath',
          'ssm:PutParameter',
          'ssm:DeleteParameter',
          'ssm:DeleteParameters',
          'ssm:AddTagsToResource',
        ],
        Resource: unique([secretsResource(n), ...[n.amiParameter, n.dockerNameParameter, n.dockerPatParameter].map(arn.parameter)]),
      },
      { Sid: 'PublicUbuntuAmi', Effect: 'Allow', Action: 'ssm:GetParameter', Resource: arn.parameter(n.ubuntuParameter) },
      {
        Sid: 'PassWorkerRole',
        Effect: 'Allow',
        Action: 'iam:PassRole',
        Resource: `arn:aws:iam::*:role/${n.workerRole}`,
        Condition: { StringEquals: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
      },
      // The controller checks the workers' profile and its role before it creates anything.
      { Sid: 'CheckWorkerInstanceProfile', Effect: 'Allow', Action: 'iam:GetInstanceProfile', Resource: `arn:aws:iam::*:instance-profile/${n.workerRole}` },
    ],
  };
}

function workerPolicy(n: FleetPolicyNames): PolicyDocument {
  const statements: PolicyStatement[] = [
    {
      Sid: 'FleetQueues',
      Effect: 'Allow',
      Action: ['sqs:GetQueueUrl', 'sqs:GetQueueAttributes', 'sqs:SendMessage', 'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility'],
      Resource: arn.queues(n),
    },
    { Sid: 'FleetBucket', Effect: 'Allow', Action: 's3:ListBucket', Resource: arn.bucket(n) },
    { Sid: 'FleetObjectsRead', Effect: 'Allow', Action: 's3:GetObject', Resource: arn.objects(n) },
    // Results are written once (If-None-Match: *): the role cannot overwrite one, its own or
    // another worker's. `*` spans `/`, so the keys below that are the controller's are denied.
    {
      Sid: 'FleetResultsFirstWriterOnly',
      Effect: 'Allow',
      Action: 's3:PutObject',
      Resource: `arn:aws:s3:::${n.bucket}/*.eval`,
      Condition: { Null: { 's3:if-none-match': 'false' } },
    },
    {
      Sid: 'FleetWorkerLogsAndSampleErrors',
      Effect: 'Allow',
      Action: 's3:PutObject',
      Resource: [`arn:aws:s3:::${n.bucket}/*/logs/*`, `arn:aws:s3:::${n.bucket}/*/errors/sample/*`],
    },
    {
      Sid: 'NotTheControllersObjects',
      Effect: 'Deny',
      Action: 's3:PutObject',
      Resource: [
        `arn:aws:s3:::${n.bucket}/*/inputs/*`,
        `arn:aws:s3:::${n.bucket}/*/manifest.json`,
        `arn:aws:s3:::${n.bucket}/*/queue-ledger.json`,
        `arn:aws:s3:::${n.bucket}/artifacts/*`,
      ],
    },
    {
      Sid: 'FleetSecretsAndRegistryAuth',
      Effect: 'Allow',
      Action: ['ssm:GetParameter', 'ssm:GetParameters', 'ssm:GetParametersByPath'],
      Resource: unique([secretsResource(n), arn.parameter(n.dockerNameParameter), arn.parameter(n.dockerPatParameter)]),
    },
  ];
  if (n.kmsKey) {
    statements.push({
      Sid: 'DecryptParametersWithCustomerKey',
      Effect: 'Allow',
      Action: 'kms:Decrypt',
      Resource: n.kmsKey,
      // Only as SSM decrypts a parameter for the worker, not for anything else the key protects.
      Condition: { StringLike: { 'kms:ViaService': 'ssm.*.amazonaws.com' } },
    });
  }
  return { Version: '2012-10-17', Statement: statements };
}

function workerTrustPolicy(): PolicyDocument {
  return {
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' }],
  };
}

/**
 * docs/fleet-on-aws.md as written: every command of its shell blocks runs, in the page's order, in
 * one bash in a fresh project folder holding the page's ct.config.yml and .env, against
 * moto_server: the AWS CLI's `s3`, `iam`, `sso-admin` and `identitystore` commands (IAM checks the
 * policy documents ct rendered, and EC2 the instance profile they made) and the ct commands
 * (`ct cloud iam-policy | put-docker-auth | build-ami | status | cleanup`, `ct settings`, the
 * estimate). The one command not run is the first fleet itself (test/fleet/fleet-ec2-workers.test.ts
 * runs one end to end); it must be the estimate's command without `--estimate`.
 *
 * Stand-ins for what moto_server or this machine lacks, each outside the page's commands: IAM
 * Identity Center's attributes for access control (sso-admin-stand-in.ts; every other sso-admin
 * call is moto's), the setting's GitHub URL (git's `insteadOf`, through GIT_CONFIG_* in the
 * environment, to a local repository), the AMI builder's registry and npm (registry-stand-in.ts)
 * and the instance that runs the builder's user-data (the instance harness). Seeded first: the
 * Identity Center user alice, a stock Ubuntu AMI behind CT_EC2_AMI_PARAMETER (moto has no public
 * Ubuntu parameter), and an orphaned worker of the caller's for status and cleanup to find.
 */
import assert from 'node:assert/strict';
import { DescribeImagesCommand, DescribeInstancesCommand, EC2Client, RunInstancesCommand } from '@aws-sdk/client-ec2';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParameterCommand, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { fencedBlocks, fileBlocks, runShellSteps, shellCommands, type StepResult } from '../helpers/doc-commands.js';
import { FAKE_AWS } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { CT_BIN, REPO_ROOT } from '../helpers/paths.js';
import { InstanceHarness } from '../fleet/helpers/instance-harness.js';
import { UBUNTU_PARAMETER } from '../fleet/helpers/ec2-fleet-world.js';
import { SettingRepo, isolatedEnv } from '../settings/helpers/git-fixtures.js';
import { registryStandIn, type RegistryStandIn } from './helpers/registry-stand-in.js';
import { startSsoAdminStandIn, type SsoAdminStandIn } from './helpers/sso-admin-stand-in.js';

const PAGE = readFileSync(join(REPO_ROOT, 'docs', 'fleet-on-aws.md'), 'utf8');
const COMMANDS = fencedBlocks(PAGE)
  .filter((b) => b.lang === 'bash')
  .flatMap((b) => shellCommands(b.text));
/** The first fleet: not run here (see the header). */
const isFirstRun = (c: string) => /^ct run eval --ec2\b/.test(c) && !/\s--estimate\b/.test(c);
/** What this test knows how to run; a command of another shape needs a decision here first. */
const RUNNABLE = [/^ct (cloud|settings) /, /^ct run eval --ec2 .*--estimate\b/, /^aws (s3|iam|sso-admin|identitystore) /, /^[A-Z_]+=\$\(aws (iam|sso-admin|identitystore) [^)]*\)$/];

const BUCKET = 'acme-ct-fleet-results';
const SETTING_URL = 'https://github.com/acme/ct-demo-setting.git';
/** The caller ct sees with the fake keys (moto's user), whose orphan cleanup finds. */
const CALLER = 'moto';
const execFileP = promisify(execFile);

describe('docs/fleet-on-aws.md, every command against moto_server', () => {
  let moto: Moto;
  let sso: SsoAdminStandIn;
  let registry: RegistryStandIn;
  let harness: InstanceHarness;
  let base: string;
  let project: string;
  let env: NodeJS.ProcessEnv;
  let steps: StepResult[] = [];
  let orphan: string;
  const clients = () => ({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });
  const aws = async (...args: string[]) => (await execFileP('aws', [...args, '--output', 'json'], { cwd: project, env })).stdout;
  /** The first step whose command matches. */
  const step = (re: RegExp) => {
    const s = steps.find((x) => re.test(x.command));
    assert.ok(s, `no step ran ${re}; ran:\n${steps.map((x) => x.command).join('\n')}`);
    return s;
  };

  before(async () => {
    assert.ok(COMMANDS.length >= 25, `only ${COMMANDS.length} commands found in the page`);
    moto = await startMoto();
    sso = await startSsoAdminStandIn(moto.url);
    base = mkdtempSync(join(tmpdir(), 'ct-fleet-on-aws-'));
    project = join(base, 'project');
    mkdirSync(project);
    const bin = join(base, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'ct'), `#!/bin/sh\nexec "${process.execPath}" "${CT_BIN}" "$@"\n`, { mode: 0o755 });
    const setting = new SettingRepo(base, 'ct-demo-setting');
    env = isolatedEnv({
      ...FAKE_AWS,
      PATH: `${bin}:${process.env.PATH}`,
      AWS_DEFAULT_REGION: 'us-east-1',
      AWS_ENDPOINT_URL: moto.url,
      AWS_ENDPOINT_URL_SSO_ADMIN: sso.url,
      // The machine's own AWS CLI configuration stays out.
      AWS_CONFIG_FILE: join(base, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(base, 'no-aws-credentials'),
      AWS_PAGER: '',
      CT_STATE_DIR: join(base, 'state'),
      CT_EC2_AMI_PARAMETER: UBUNTU_PARAMETER,
      CT_FLEET_AMI_POLL_SECONDS: '0.3',
      CT_FLEET_AMI_BUILD_TIMEOUT: '240',
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: `url.${setting.bare}.insteadOf`,
      GIT_CONFIG_VALUE_0: SETTING_URL,
      NO_COLOR: '1',
    });
    delete env.AWS_PROFILE;

    // Seeds: the Identity Center user, stock Ubuntu, an orphaned worker of the caller's.
    const store = JSON.parse(await aws('sso-admin', 'list-instances')).Instances[0].IdentityStoreId as string;
    await aws('identitystore', 'create-user', '--identity-store-id', store, '--user-name', 'alice', '--display-name', 'Alice', '--name', 'GivenName=Alice,FamilyName=Example');
    const ec2 = new EC2Client(clients());
    const ssm = new SSMClient(clients());
    try {
      const ubuntu = (await ec2.send(new DescribeImagesCommand({ Owners: ['amazon'] }))).Images![0]!.ImageId!;
      await ssm.send(new PutParameterCommand({ Name: UBUNTU_PARAMETER, Value: ubuntu, Type: 'String' }));
      const tags = { FleetId: 'ghost0', LaunchedBy: CALLER, ManagedBy: 'ct', Name: 'linuxbench-worker-ghost0' };
      const r = await ec2.send(
        new RunInstancesCommand({ ImageId: ubuntu, InstanceType: 'c7i.4xlarge', MinCount: 1, MaxCount: 1, TagSpecifications: [{ ResourceType: 'instance', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) }] }),
      );
      orphan = r.Instances![0]!.InstanceId!;
      registry = registryStandIn(join(base, 'registry'));
      registry.setDigests({ 'busybox:latest': 'sha256:b0b0', 'debian:bookworm-slim': 'sha256:deb1' });
      harness = new InstanceHarness({ motoUrl: moto.url, stockImages: [ubuntu], pathPrefix: [registry.shims], pollMs: 200, env: registry.env });
      harness.start();
    } finally {
      ec2.destroy();
      ssm.destroy();
    }

    for (const f of fileBlocks(PAGE)) writeFileSync(join(project, f.name), f.text);
    steps = await runShellSteps(
      COMMANDS.filter((c) => !isFirstRun(c)),
      { cwd: project, env, dir: join(base, 'steps'), timeoutMs: 480_000 },
    );
  });
  after(async () => {
    await harness?.stop();
    harness?.cleanup();
    await sso?.close();
    await moto?.stop();
    if (base) rmSync(base, { recursive: true, force: true });
  });

  test('the page shows the files and commands this test runs, in the order the page gives', () => {
    assert.deepEqual(
      fileBlocks(PAGE).map((f) => f.name),
      ['ct.config.yml', '.env'],
    );
    const unknown = COMMANDS.filter((c) => !isFirstRun(c) && !RUNNABLE.some((re) => re.test(c)));
    assert.deepEqual(unknown, [], 'commands this test does not know how to run');
    const order = [/^aws s3 mb /, /--role worker-trust/, /^aws iam create-role /, /^POLICY_ARN=/, /create-instance-access-control-attribute-configuration/, /^ct cloud put-docker-auth/, /^ct settings add /, /^ct cloud build-ami/, /--estimate/, /^ct cloud status/, /^ct cloud cleanup --yes/];
    const at = order.map((re) => COMMANDS.findIndex((c) => re.test(c)));
    assert.ok(!at.includes(-1), `missing: ${order.filter((_, i) => at[i] === -1).join(', ')}`);
    assert.deepEqual([...at].sort((a, b) => a - b), at, 'in the order of the page');
  });

  test('every command ran and succeeded', () => {
    const failed = steps.find((s) => s.code !== 0);
    assert.equal(failed, undefined, failed && `${failed.command}\nexit ${failed.code}\n--- stdout\n${failed.stdout}\n--- stderr\n${failed.stderr}\n${harness.errors.join('\n')}`);
    assert.equal(steps.length, COMMANDS.filter((c) => !isFirstRun(c)).length);
  });

  test('the first run is the estimated command without --estimate', () => {
    const runs = COMMANDS.filter(isFirstRun);
    const estimates = COMMANDS.filter((c) => /^ct run eval --ec2 .*--estimate\b/.test(c));
    assert.equal(runs.length, 1);
    assert.deepEqual(estimates.map((c) => c.replace(/\s--estimate\b/, '')), runs);
  });

  test("the bucket of ct.config.yml is the one created and the one the rendered policies name", async () => {
    assert.match(await aws('s3api', 'list-buckets'), new RegExp(`"Name": "${BUCKET}"`));
    for (const file of ['worker-policy.json', 'fleet-user-policy.json']) {
      const text = readFileSync(join(project, file), 'utf8');
      assert.match(text, new RegExp(`arn:aws:s3:::${BUCKET}/\\*`), file);
      assert.doesNotMatch(text, /lb-fleet-results-migrated/, file);
    }
  });

  test('the worker role: EC2 may assume it, its policy is the rendering (with the customer key last put), its instance profile holds it', async () => {
    const role = JSON.parse(await aws('iam', 'get-role', '--role-name', 'linuxbench-worker')).Role;
    assert.deepEqual(role.AssumeRolePolicyDocument, JSON.parse(readFileSync(join(project, 'worker-trust-policy.json'), 'utf8')));
    const inline = JSON.parse(await aws('iam', 'get-role-policy', '--role-name', 'linuxbench-worker', '--policy-name', 'ct-fleet-worker'));
    assert.deepEqual(inline.PolicyDocument, JSON.parse(readFileSync(join(project, 'worker-policy.json'), 'utf8')));
    const kms = inline.PolicyDocument.Statement.filter((s: { Action: string }) => s.Action === 'kms:Decrypt');
    assert.equal(kms.length, 1, 'the --kms-key rendering replaced the first one');
    assert.equal(step(/get-instance-profile/).stdout.trim(), 'linuxbench-worker');
  });

  test('the IAM user: the managed policy at its second version, attached to alice, who has a key', async () => {
    const attached = JSON.parse(await aws('iam', 'list-attached-user-policies', '--user-name', 'alice')).AttachedPolicies;
    assert.deepEqual(attached.map((p: { PolicyName: string }) => p.PolicyName), ['ct-fleet-access']);
    const policy = JSON.parse(await aws('iam', 'get-policy', '--policy-arn', attached[0].PolicyArn)).Policy;
    assert.equal(policy.DefaultVersionId, 'v2');
    const version = JSON.parse(await aws('iam', 'get-policy-version', '--policy-arn', attached[0].PolicyArn, '--version-id', 'v2')).PolicyVersion;
    const doc = typeof version.Document === 'string' ? JSON.parse(decodeURIComponent(version.Document)) : version.Document;
    assert.deepEqual(doc, JSON.parse(readFileSync(join(project, 'fleet-user-policy.json'), 'utf8')));
    assert.match(step(/create-access-key/).stdout, /"AccessKeyId": "AKIA/);
  });

  test("SSO: LaunchedBy is the user's name for every session, the permission set holds the policy, alice is assigned", async () => {
    assert.deepEqual(sso.requests, [
      {
        operation: 'CreateInstanceAccessControlAttributeConfiguration',
        body: {
          InstanceArn: JSON.parse(await aws('sso-admin', 'list-instances')).Instances[0].InstanceArn,
          InstanceAccessControlAttributeConfiguration: { AccessControlAttributes: [{ Key: 'LaunchedBy', Value: { Source: ['${path:userName}'] } }] },
        },
      },
    ]);
    const instance = JSON.parse(await aws('sso-admin', 'list-instances')).Instances[0].InstanceArn as string;
    const sets = JSON.parse(await aws('sso-admin', 'list-permission-sets', '--instance-arn', instance)).PermissionSets as string[];
    assert.equal(sets.length, 1);
    const described = JSON.parse(await aws('sso-admin', 'describe-permission-set', '--instance-arn', instance, '--permission-set-arn', sets[0]!)).PermissionSet;
    assert.equal(described.Name, 'CtFleet');
    assert.equal(described.SessionDuration, 'PT12H');
    const inline = JSON.parse(await aws('sso-admin', 'get-inline-policy-for-permission-set', '--instance-arn', instance, '--permission-set-arn', sets[0]!)).InlinePolicy;
    assert.deepEqual(JSON.parse(inline), JSON.parse(readFileSync(join(project, 'fleet-user-policy.json'), 'utf8')));
    const assignments = JSON.parse(
      await aws('sso-admin', 'list-account-assignments', '--instance-arn', instance, '--account-id', '111122223333', '--permission-set-arn', sets[0]!),
    ).AccountAssignments;
    const store = JSON.parse(await aws('sso-admin', 'list-instances')).Instances[0].IdentityStoreId as string;
    const alice = JSON.parse(await aws('identitystore', 'list-users', '--identity-store-id', store)).Users.find((u: { UserName: string }) => u.UserName === 'alice').UserId;
    assert.deepEqual(
      assignments.map((a: { PrincipalType: string; PrincipalId: string }) => [a.PrincipalType, a.PrincipalId]),
      [['USER', alice]],
    );
  });

  test("the registry credentials of the page's .env: in SSM, the token as SecureString; the AMI builder logged in with them", async () => {
    const ssm = new SSMClient(clients());
    try {
      const name = (await ssm.send(new GetParameterCommand({ Name: '/linuxbench/docker-org-name' }))).Parameter!;
      const pat = (await ssm.send(new GetParameterCommand({ Name: '/linuxbench/docker-org-pat', WithDecryption: true }))).Parameter!;
      assert.deepEqual([name.Type, name.Value], ['String', 'acme']);
      assert.deepEqual([pat.Type, pat.Value], ['SecureString', 'dckr_pat_replace_me']);
    } finally {
      ssm.destroy();
    }
    assert.deepEqual(registry.logins(), ['login --username acme --password-stdin token:yes']);
  });

  test('the setting: registered with its repository, pulled, its commit locked', () => {
    const config = readFileSync(join(project, 'ct.config.yml'), 'utf8');
    assert.match(config, new RegExp(`demo:\\n\\s+repo: ${SETTING_URL.replace(/[.]/g, '\\.')}`));
    assert.match(config, /bucket: acme-ct-fleet-results/, 'the rest of the file kept');
    assert.match(readFileSync(join(project, '.settings.lock.yml'), 'utf8'), /commit: [0-9a-f]{40}/);
    assert.ok(readFileSync(join(project, '.settings', 'demo', 'task_sets', 'demo.jsonl'), 'utf8').includes('notes_app'));
  });

  test("the worker AMI: built from stock Ubuntu by a builder with the page's instance profile, its id in SSM, the settings' images pulled", async () => {
    const ami = step(/^ct cloud build-ami/).stdout.trim();
    assert.match(ami, /^ami-\w+$/);
    const ssm = new SSMClient(clients());
    try {
      assert.equal((await ssm.send(new GetParameterCommand({ Name: '/linuxbench/worker-ami-id' }))).Parameter?.Value, ami);
    } finally {
      ssm.destroy();
    }
    const builders = [...harness.instances.values()].filter((i) => i.id !== orphan);
    assert.equal(builders.length, 1);
    assert.match(builders[0]!.profileArn ?? '', /:instance-profile\/linuxbench-worker$/);
    assert.deepEqual(registry.pulls().sort(), ['busybox:latest', 'debian:bookworm-slim']);
  });

  test('the estimate: 8 jobs (4 samples x 2 epochs) on EC2 workers from the AMI just built, with a price, and nothing created', async () => {
    const out = step(/--estimate/);
    const text = out.stdout + out.stderr;
    assert.match(text, /fleet [0-9a-f]{16}: 8 job\(s\), 0 already finished, 8 to run/);
    assert.match(text, new RegExp(`c7i\\.4xlarge EC2 instances \\(spot, on-demand fallback; worker AMI ${step(/^ct cloud build-ami/).stdout.trim()}\\)`));
    assert.match(text, /estimated cost: \$\d+\.\d\d/);
    const sqs = new SQSClient(clients());
    try {
      assert.deepEqual((await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? [], []);
    } finally {
      sqs.destroy();
    }
  });

  test("status and cleanup: the caller's orphaned worker is shown, listed, then terminated", async () => {
    assert.match(step(/^ct cloud status$/).stdout, new RegExp(`fleet ghost0 \\(${CALLER}\\): 1 worker\\(s\\)(.*\\n)+\\s+${orphan} .* running`));
    assert.match(step(/^ct cloud cleanup$/).stdout, new RegExp(`${orphan}.*\\n(.*\\n)*.*run again with --yes`));
    assert.match(step(/^ct cloud cleanup --yes$/).stdout, /removed \d+ of \d+ leftover/);
    const ec2 = new EC2Client(clients());
    try {
      const r = await ec2.send(new DescribeInstancesCommand({ InstanceIds: [orphan] }));
      assert.equal(r.Reservations![0]!.Instances![0]!.State?.Name, 'terminated');
    } finally {
      ec2.destroy();
    }
  });
});

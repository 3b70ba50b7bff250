/**
 * `ct cloud iam-policy`: the fleet's IAM policies rendered from the config. The files in ops/docs
 * are its output for the default config; names from ct.config.yml, CT_FLEET_BUCKET and --bucket
 * reach the policies (checked by evaluating them offline, as IAM would, for the names a user
 * chose and against the defaults); kms:Decrypt only with --kms-key; bad input exits 2; no AWS
 * credentials are needed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ctEnv, runCt } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { ACCOUNT, decision, type Request, type Who } from './helpers/iam-decision.js';

const KEY = `arn:aws:kms:us-east-1:${ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab`;
const ALICE: Who = { label: 'IAM user alice', principal: `arn:aws:iam::${ACCOUNT}:user/alice`, context: { 'aws:username': 'alice' } };
const SSO: Who = {
  label: 'SSO session alice',
  principal: `arn:aws:sts::${ACCOUNT}:assumed-role/AWSReservedSSO_CtFleet_0123456789abcdef/alice`,
  context: { 'aws:PrincipalTag/LaunchedBy': 'alice' },
};
const WORKER: Who = { label: 'worker role', principal: `arn:aws:sts::${ACCOUNT}:assumed-role/acme-ct-worker/i-0abc`, context: {} };
/** The key policy AWS gives the AWS-managed key aws/ssm (as IAM shows it, account filled in). */
const AWS_SSM_KEY_POLICY = {
  Version: '2012-10-17',
  Statement: [
    {
      Effect: 'Allow',
      Principal: { AWS: '*' },
      Action: ['kms:Encrypt', 'kms:Decrypt', 'kms:ReEncrypt*', 'kms:GenerateDataKey*', 'kms:CreateGrant', 'kms:DescribeKey'],
      Resource: '*',
      Condition: { StringEquals: { 'kms:CallerAccount': ACCOUNT, 'kms:ViaService': 'ssm.us-east-1.amazonaws.com' } },
    },
  ],
};
/** The default policy of a customer-managed key: the account's IAM policies decide. */
const DEFAULT_KEY_POLICY = {
  Version: '2012-10-17',
  Statement: [{ Sid: 'Enable IAM User Permissions', Effect: 'Allow', Principal: { AWS: `arn:aws:iam::${ACCOUNT}:root` }, Action: 'kms:*', Resource: '*' }],
};
const param = (name: string) => `arn:aws:ssm:us-east-1:${ACCOUNT}:parameter${name}`;
const queue = (name: string) => `arn:aws:sqs:us-east-1:${ACCOUNT}:${name}`;

/** A config with every name the policies take changed from its default. */
const ACME_CONFIG = `
ec2:
  ami_parameter: /acme/ubuntu-ami
fleet:
  bucket: acme-from-file
  queue_prefix: acme-q-
  secrets_prefix: /acme/fleet-secrets/
  ami_parameter: /acme/worker-ami
  docker_org_name_parameter: /acme/registry-name
  docker_org_pat_parameter: /acme/registry-pat
  instance_profile: acme-ct-worker
`;

describe('ct cloud iam-policy', () => {
  let cwd: string;
  let acme: string;
  /** No config file, no CT_* or AWS_* variable: the defaults. */
  const env = (extra: Record<string, string> = {}) => {
    const e = ctEnv(extra);
    for (const k of Object.keys(e)) if ((k.startsWith('CT_') || k.startsWith('AWS_') || k.startsWith('DOCKER_ORG_')) && !(k in extra)) delete e[k];
    return e;
  };
  const policy = async (args: string[], o: { cwd?: string; env?: Record<string, string> } = {}) => {
    const r = await runCt(['cloud', 'iam-policy', ...args], { cwd: o.cwd ?? cwd, env: env(o.env) });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    return { text: r.stdout, doc: JSON.parse(r.stdout) as { Statement: Array<{ Sid?: string; Action: string | string[]; Resource: string | string[] }> } };
  };

  before(() => {
    cwd = mkdtempSync(join(tmpdir(), 'ct-iam-policy-'));
    acme = mkdtempSync(join(tmpdir(), 'ct-iam-policy-acme-'));
    writeFileSync(join(acme, 'ct.config.yml'), ACME_CONFIG);
  });
  after(() => {
    rmSync(cwd, { recursive: true, force: true });
    rmSync(acme, { recursive: true, force: true });
  });

  test('the files in ops/docs are what it prints for the default config (user by default, worker, worker-trust)', async () => {
    const file = (name: string) => readFileSync(join(REPO_ROOT, 'ops', 'docs', name), 'utf8');
    assert.equal((await policy([])).text, file('fleet-iam-policy.json'));
    assert.equal((await policy(['--role', 'user'])).text, file('fleet-iam-policy.json'));
    assert.equal((await policy(['--role', 'worker'])).text, file('fleet-worker-role-policy.json'));
    assert.equal((await policy(['--role', 'worker-trust'])).text, file('fleet-worker-trust-policy.json'));
    assert.deepEqual(JSON.parse(file('fleet-worker-trust-policy.json')).Statement, [
      { Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' },
    ]);
  });

  test("the names in ct.config.yml are the policies' names: allowed on them, denied on the defaults", async () => {
    const user = (await policy([], { cwd: acme })).doc;
    const worker = (await policy(['--role', 'worker'], { cwd: acme })).doc;
    const allowedForUser: Request[] = [
      { action: 's3:PutObject', resource: 'arn:aws:s3:::acme-from-file/f0/manifest.json' },
      { action: 's3:ListBucket', resource: 'arn:aws:s3:::acme-from-file' },
      { action: 'sqs:CreateQueue', resource: queue('acme-q-f0-work') },
      { action: 'ssm:PutParameter', resource: param('/acme/fleet-secrets/f0/ANTHROPIC_API_KEY') },
      { action: 'ssm:GetParametersByPath', resource: param('/acme/fleet-secrets/') },
      { action: 'ssm:PutParameter', resource: param('/acme/worker-ami') },
      { action: 'ssm:PutParameter', resource: param('/acme/registry-name') },
      { action: 'ssm:PutParameter', resource: param('/acme/registry-pat') },
      { action: 'ssm:GetParameter', resource: param('/acme/ubuntu-ami') },
      { action: 'iam:PassRole', resource: `arn:aws:iam::${ACCOUNT}:role/acme-ct-worker`, context: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
    ];
    const allowedForWorker: Request[] = [
      { action: 's3:GetObject', resource: 'arn:aws:s3:::acme-from-file/artifacts/abc.tar.gz' },
      { action: 'sqs:ReceiveMessage', resource: queue('acme-q-f0-work') },
      { action: 'ssm:GetParametersByPath', resource: param('/acme/fleet-secrets/f0/') },
      { action: 'ssm:GetParameter', resource: param('/acme/registry-pat') },
    ];
    const deniedForAll: Request[] = [
      { action: 's3:PutObject', resource: 'arn:aws:s3:::lb-fleet-results-migrated/f0/manifest.json' },
      { action: 'sqs:SendMessage', resource: queue('lb-fleet-f0-work') },
      { action: 'ssm:GetParameter', resource: param('/linuxbench/fleet/f0/ANTHROPIC_API_KEY') },
      { action: 'ssm:GetParameter', resource: param('/linuxbench/docker-org-pat') },
      { action: 'ssm:GetParameter', resource: param('/acme/other') },
      { action: 'iam:PassRole', resource: `arn:aws:iam::${ACCOUNT}:role/linuxbench-worker`, context: { 'iam:PassedToService': 'ec2.amazonaws.com' } },
    ];
    const wrong: string[] = [];
    const expect = async (doc: unknown, who: Who, r: Request, want: boolean) => {
      const got = await decision(doc, who, r);
      if ((got === 'Allowed') !== want) wrong.push(`${who.label}: ${r.action} on ${r.resource} -> ${got}`);
    };
    for (const who of [ALICE, SSO]) {
      for (const r of allowedForUser) await expect(user, who, r, true);
      for (const r of deniedForAll) await expect(user, who, r, false);
    }
    for (const r of allowedForWorker) await expect(worker, WORKER, r, true);
    for (const r of deniedForAll) await expect(worker, WORKER, r, false);
    assert.deepEqual(wrong, []);
  });

  test('the bucket: ct.config.yml < CT_FLEET_BUCKET < --bucket', async () => {
    const buckets = (doc: { Statement: Array<{ Resource: string | string[] }> }) =>
      [...new Set(doc.Statement.flatMap((s) => [s.Resource].flat()).filter((r) => r.startsWith('arn:aws:s3:::')).map((r) => r.replace(/^arn:aws:s3:::/, '').split('/')[0]!))];
    assert.deepEqual(buckets((await policy([], { cwd: acme })).doc), ['acme-from-file']);
    assert.deepEqual(buckets((await policy([], { cwd: acme, env: { CT_FLEET_BUCKET: 'acme-from-env' } })).doc), ['acme-from-env']);
    assert.deepEqual(buckets((await policy(['--bucket', 'acme-from-flag'], { cwd: acme, env: { CT_FLEET_BUCKET: 'acme-from-env' } })).doc), ['acme-from-flag']);
    assert.deepEqual(buckets((await policy(['--role', 'worker', '--bucket', 'acme-from-flag'], { cwd: acme })).doc), ['acme-from-flag']);
  });

  test('kms:Decrypt: the aws/ssm key needs no grant; a customer-managed key only with --kms-key, on that key, through SSM only', async () => {
    for (const role of ['user', 'worker', 'worker-trust']) assert.doesNotMatch((await policy(['--role', role])).text, /kms:/);
    const withKey = (await policy(['--role', 'worker', '--kms-key', KEY])).doc;
    const plain = (await policy(['--role', 'worker'])).doc;
    assert.deepEqual(withKey.Statement.slice(0, -1), plain.Statement, 'the other statements are unchanged');
    const viaSsm = { 'kms:ViaService': 'ssm.us-east-1.amazonaws.com', 'kms:CallerAccount': ACCOUNT };
    const decrypt = { action: 'kms:Decrypt', resource: KEY, context: viaSsm };
    // KMS asks the key's own policy too. aws/ssm's lets every principal of the account use it through SSM ...
    assert.equal(await decision(plain, WORKER, decrypt, AWS_SSM_KEY_POLICY), 'Allowed', 'aws/ssm without any kms grant');
    assert.notEqual(await decision(plain, WORKER, { ...decrypt, context: { 'kms:CallerAccount': ACCOUNT } }, AWS_SSM_KEY_POLICY), 'Allowed', 'aws/ssm outside SSM');
    // ... a customer-managed key's default policy leaves it to the account's IAM policies.
    assert.notEqual(await decision(plain, WORKER, decrypt, DEFAULT_KEY_POLICY), 'Allowed', 'a customer key without --kms-key');
    assert.equal(await decision(withKey, WORKER, decrypt, DEFAULT_KEY_POLICY), 'Allowed', 'a customer key with --kms-key');
    assert.notEqual(await decision(withKey, WORKER, { ...decrypt, context: { 'kms:CallerAccount': ACCOUNT } }, DEFAULT_KEY_POLICY), 'Allowed', 'not outside SSM');
    assert.notEqual(await decision(withKey, WORKER, { ...decrypt, resource: KEY.replace('1234abcd', '9999abcd') }, DEFAULT_KEY_POLICY), 'Allowed', 'not another key');
    assert.notEqual(await decision(withKey, WORKER, { ...decrypt, action: 'kms:Encrypt' }, DEFAULT_KEY_POLICY), 'Allowed', 'decrypt only');
  });

  test('bad input exits 2 with a message and prints no policy', async () => {
    const cases: Array<[string[], RegExp, Record<string, string>?]> = [
      [['--role', 'admin'], /argument 'admin' is invalid\. Allowed choices are user, worker, worker-trust/],
      [['--kms-key', KEY], /--kms-key .*use it with --role worker/],
      [['--role', 'worker-trust', '--kms-key', KEY], /use it with --role worker/],
      [['--role', 'worker', '--kms-key', 'alias/acme-registry'], /expected a key ARN \(arn:aws:kms:REGION:ACCOUNT:key\/KEY-ID\)/],
      [['--bucket', 'Acme_Results'], /fleet\.bucket \(from command line\): not a valid S3 bucket name/],
      [['--bucket', 'acme-*'], /not a valid S3 bucket name/],
      [[], /CT_FLEET_QUEUE_PREFIX=q\* \(fleet\.queue_prefix\)/, { CT_FLEET_QUEUE_PREFIX: 'q*' }],
      [[], /CT_FLEET_AMI_PARAMETER=\/acme\/\* \(fleet\.ami_parameter\): an SSM parameter name/, { CT_FLEET_AMI_PARAMETER: '/acme/*' }],
      [['--region', 'us-east-1'], /unknown option '--region'/],
    ];
    for (const [args, message, extra] of cases) {
      const r = await runCt(['cloud', 'iam-policy', ...args], { cwd, env: env(extra) });
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.equal(r.stdout, '', args.join(' '));
    }
  });

  test('needs no AWS credentials, not even consistent ones (a profile and static keys together)', async () => {
    const r = await policy(['--role', 'worker'], { env: { AWS_PROFILE: 'ct-no-such-profile', AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKEFAKE', AWS_SECRET_ACCESS_KEY: 'fake' } });
    assert.ok(r.doc.Statement.length >= 4);
  });

  test('--help shows the roles and an example', async () => {
    const r = await runCt(['cloud', 'iam-policy', '--help'], { cwd, env: env() });
    assert.equal(r.code, 0);
    assert.match(r.stdout, /--role <role>/);
    assert.match(r.stdout, /choices: "user", "worker", "worker-trust"/);
    assert.match(r.stdout, /Examples:\n {2}ct cloud iam-policy > fleet-user-policy\.json/);
    assert.match(r.stdout, /docs\/fleet-on-aws\.md/);
  });
});

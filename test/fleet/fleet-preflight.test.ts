/**
 * Check first, create later: what `ct run eval --fleet` can know before a queue exists is checked
 * before anything is created. Each refusal exits 2 with what is wrong and what to do, and moto
 * holds nothing afterwards: no queue, bucket, object, SSM parameter, instance or security group.
 * The real CLI against moto_server; the ssh:// sandbox against a loopback sshd; S3 answers moto
 * cannot give (403, another region) and an endpoint that never answers from loopback servers.
 */
import assert from 'node:assert/strict';
import { CreateInstanceProfileCommand, IAMClient } from '@aws-sdk/client-iam';
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { DescribeParametersCommand, SSMClient } from '@aws-sdk/client-ssm';
import { existsSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { bucketNameProblem } from '../../src/cloud/bucket-name.js';
import { runCt, type CtResult } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { freePort, startSshd, type Sshd } from '../helpers/sshd.js';
import { EC2_FLEET_ENV, seedEc2FleetWorld, useEc2FleetFixture } from './helpers/ec2-fleet-world.js';

const BUCKET = 'lb-fleet-results-migrated';
const RUN = ['run', 'eval', '--fleet', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test'];
const EC2_RUN = ['run', 'eval', '--ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test'];

/** What moto holds that a fleet could have created. */
interface Cloud {
  queues: string[];
  buckets: string[];
  objects: string[];
  parameters: string[];
  instances: string[];
  securityGroups: string[];
}

/** An IAM refusal as IAM sends it (its query protocol's XML). */
const IAM_ACCESS_DENIED = '<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>not authorized to perform iam:GetInstanceProfile</Message></Error><RequestId>1</RequestId></ErrorResponse>';

/** A loopback server answering every request with `status`, `headers` and `body` (answers moto cannot be made to give). */
function fakeService(status: number, headers: Record<string, string> = {}, body = '<?xml version="1.0"?><Error><Code>Refused</Code><Message>refused</Message></Error>'): Promise<{ url: string; server: Server }> {
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(status, { 'content-type': 'text/xml', ...headers });
      res.end(req.method === 'HEAD' ? undefined : body);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server })));
}

describe('a fleet checks first and creates later', () => {
  // moto with the worker instance profile and AMI parameter, and a project whose demo setting is a registered git repository.
  const f = useEc2FleetFixture('preflight');
  /** A project whose demo setting is only a folder (the example settings copied). */
  let plain: ReturnType<typeof fleetWorkDir>;
  /** Security groups and SSM parameters the seeding made (moto's default group, the AMI parameter). */
  let seeded: Pick<Cloud, 'parameters' | 'securityGroups'>;

  before(async () => {
    await seedEc2FleetWorld(f.moto.url, { workerAmi: false });
    plain = fleetWorkDir('preflight-plain');
    const c = await cloud();
    seeded = { parameters: c.parameters, securityGroups: c.securityGroups };
  });
  after(() => rmSync(plain.work, { recursive: true, force: true }));

  async function cloud(): Promise<Cloud> {
    const ssm = new SSMClient(f.aws());
    const ec2 = new EC2Client(f.aws());
    try {
      const parameters: string[] = [];
      let next: string | undefined;
      do {
        const r = await ssm.send(new DescribeParametersCommand({ NextToken: next }));
        parameters.push(...(r.Parameters ?? []).map((p) => p.Name!));
        next = r.NextToken;
      } while (next);
      const instances = ((await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((r) => (r.Instances ?? []).map((i) => i.InstanceId!));
      const securityGroups = ((await ec2.send(new DescribeSecurityGroupsCommand({}))).SecurityGroups ?? []).map((g) => g.GroupName!);
      return { ...(await motoContents(f.moto)), parameters: parameters.sort(), instances, securityGroups: securityGroups.sort() };
    } finally {
      ssm.destroy();
      ec2.destroy();
    }
  }

  /** Nothing a fleet creates exists (besides `buckets`, made by the test itself). */
  async function assertNothingCreated(buckets: string[] = []): Promise<void> {
    assert.deepEqual(await cloud(), { queues: [], buckets, objects: [], parameters: seeded.parameters, instances: [], securityGroups: seeded.securityGroups });
  }

  /**
   * `ct ARGS` in a project (the registered one unless `dir` says otherwise), with a model key set
   * (so a fleet that went on would store it in SSM) and its own log dir, which must stay without
   * any fleet folder (no worker was started).
   */
  async function ct(args: string[], o: { env?: Record<string, string>; dir?: ReturnType<typeof fleetWorkDir> } = {}): Promise<CtResult> {
    const dirs = o.dir ?? f.dirs;
    const logDir = testLogDir('fleet-preflight');
    const env = fleetEnv(f.moto, dirs, { ...EC2_FLEET_ENV, ANTHROPIC_API_KEY: 'sk-ant-preflight-fake', ...o.env });
    const r = await runCt(args[0] === 'run' ? [...args, '--log-dir', logDir] : args, { cwd: dirs.work, env: { ...env, CT_LOG_DIR: logDir }, timeoutMs: 120_000 });
    assert.equal(existsSync(join(logDir, 'fleet')), false, 'no worker was started');
    return r;
  }

  function assertRefused(r: CtResult, message: RegExp): void {
    assert.equal(r.code, 2, `exit code; stderr:\n${r.stderr}`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    assert.doesNotMatch(r.stderr, /^fleet [0-9a-f]{16}: /m, 'refused before the estimate');
  }

  describe('1. EC2 workers: the instance profile', () => {
    test('a profile that does not exist is refused, naming it and the setting', async () => {
      const r = await ct([...EC2_RUN, '--yes'], { env: { CT_FLEET_INSTANCE_PROFILE: 'ct-test-no-such-profile' } });
      assertRefused(r, /instance profile ct-test-no-such-profile \(fleet\.instance_profile, CT_FLEET_INSTANCE_PROFILE\) does not exist/);
      assert.match(r.stderr, /aws iam create-instance-profile --instance-profile-name ct-test-no-such-profile/);
      await assertNothingCreated();
    });

    test('a profile without a role is refused, saying how to add one', async () => {
      const iam = new IAMClient(f.aws());
      try {
        await iam.send(new CreateInstanceProfileCommand({ InstanceProfileName: 'ct-test-roleless' }));
      } finally {
        iam.destroy();
      }
      const r = await ct([...EC2_RUN, '--yes'], { env: { CT_FLEET_INSTANCE_PROFILE: 'ct-test-roleless' } });
      assertRefused(r, /instance profile ct-test-roleless .* has no role/);
      assert.match(r.stderr, /aws iam add-role-to-instance-profile --instance-profile-name ct-test-roleless/);
      await assertNothingCreated();
    });

    test('a caller not allowed to read the profile is warned, and the run goes on', async () => {
      const iam = await fakeService(403, {}, IAM_ACCESS_DENIED);
      try {
        const r = await ct([...EC2_RUN, '--estimate'], { env: { AWS_ENDPOINT_URL_IAM: iam.url } });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, /warning: cannot check instance profile linuxbench-worker \(AccessDenied: iam:GetInstanceProfile is not allowed; see ops\/docs\/fleet-iam-policy\.json\)/);
        assert.match(r.stderr, /^fleet [0-9a-f]{16}: 1 job\(s\)/m);
      } finally {
        iam.server.close();
      }
      await assertNothingCreated();
    });

    test('with the profile and its role in place the estimate is shown, and it creates nothing', async () => {
      const r = await ct([...EC2_RUN, '--estimate']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /^fleet [0-9a-f]{16}: 1 job\(s\)/m);
      await assertNothingCreated();
    });
  });

  describe('2. the bucket', () => {
    test('a name S3 would refuse is refused by the config, naming the variable', async () => {
      const r = await ct([...RUN, '--workers', 'local:1', '--yes'], { env: { CT_FLEET_BUCKET: 'Bad_Bucket!!' } });
      assertRefused(r, /CT_FLEET_BUCKET=Bad_Bucket!! \(fleet\.bucket\): not a valid S3 bucket name: uppercase letters, _ and ! not allowed/);
      await assertNothingCreated();
    });

    test("S3's naming rules", () => {
      for (const ok of [BUCKET, 'abc', 'a.b-c.d', 'x'.repeat(63), '1bucket9']) assert.equal(bucketNameProblem(ok), undefined, ok);
      const bad: Array<[string, RegExp]> = [
        ['ab', /2 characters/],
        ['x'.repeat(64), /64 characters/],
        ['My-Bucket', /uppercase letters not allowed/],
        ['my bucket', /spaces not allowed/],
        ['-bucket', /start and end with a letter or digit/],
        ['bucket.', /start and end with a letter or digit/],
        ['my..bucket', /two dots in a row/],
        ['192.168.5.4', /IP address/],
        ['xn--bucket', /prefix xn-- is reserved/],
        ['sthree-bucket', /prefix sthree- is reserved/],
        ['bucket-s3alias', /suffix -s3alias is reserved/],
        ['bucket--ol-s3', /suffix --ol-s3 is reserved/],
      ];
      for (const [name, why] of bad) assert.match(bucketNameProblem(name) ?? 'accepted', why, name);
    });

    test("a bucket these credentials may not use (another account's) is refused", async () => {
      const s3 = await fakeService(403);
      try {
        const r = await ct([...RUN, '--workers', 'local:1', '--yes'], { env: { AWS_ENDPOINT_URL_S3: s3.url } });
        assertRefused(r, new RegExp(`no access to bucket ${BUCKET} \\(owned by another account\\?\\).*CT_FLEET_BUCKET`));
      } finally {
        s3.server.close();
      }
      await assertNothingCreated();
    });

    test('a bucket in another region is refused, naming its region', async () => {
      const s3 = await fakeService(301, { 'x-amz-bucket-region': 'eu-west-1' });
      try {
        const r = await ct([...RUN, '--workers', 'local:1', '--yes'], { env: { AWS_ENDPOINT_URL_S3: s3.url } });
        assertRefused(r, new RegExp(`bucket ${BUCKET} is in region eu-west-1, and the fleet runs in us-east-1: .*CT_EC2_REGION=eu-west-1`));
      } finally {
        s3.server.close();
      }
      await assertNothingCreated();
    });
  });

  describe('3. an endpoint that does not answer', () => {
    test('refused connections: exit 2 naming the endpoint, for a run and for --estimate', async () => {
      const url = `http://127.0.0.1:${await freePort()}`;
      for (const last of ['--yes', '--estimate']) {
        const r = await ct([...RUN, '--workers', 'local:1', last], { env: { AWS_ENDPOINT_URL: url } });
        assertRefused(r, new RegExp(`AWS STS does not answer at ${url} \\(connect ECONNREFUSED .*\\) while checking your credentials: check AWS_ENDPOINT_URL=${url}`));
      }
      await assertNothingCreated();
    });

    test('an S3 endpoint of its own that refuses connections is named', async () => {
      const url = `http://127.0.0.1:${await freePort()}`;
      const r = await ct([...RUN, '--workers', 'local:1', '--yes'], { env: { AWS_ENDPOINT_URL_S3: url } });
      assertRefused(r, new RegExp(`S3 does not answer at ${url} .* while checking bucket ${BUCKET}: check AWS_ENDPOINT_URL_S3=${url}`));
      await assertNothingCreated();
    });

    test('an endpoint that takes the connection and never answers: exit 2 in under a minute', async () => {
      const sockets = new Set<Socket>();
      const silent: TcpServer = createTcpServer((s) => {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
      });
      await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      try {
        const started = Date.now();
        const r = await ct([...RUN, '--workers', 'local:1', '--estimate'], { env: { AWS_ENDPOINT_URL: url } });
        assertRefused(r, new RegExp(`AWS STS does not answer at ${url} \\(no answer in time: .*\\) while checking your credentials`));
        assert.ok(Date.now() - started < 60_000, `took ${Date.now() - started} ms`);
      } finally {
        for (const s of sockets) s.destroy();
        silent.close();
      }
      await assertNothingCreated();
    });
  });

  describe('4. an ssh:// sandbox for local workers', () => {
    let sshd: Sshd;
    before(async () => {
      sshd = await startSshd();
    });
    after(async () => {
      await sshd?.stop();
    });

    test('a host that refuses the connection fails fast, before any worker or queue', async () => {
      const spec = `ssh://${sshd.user}@127.0.0.1:${await freePort()}`;
      const started = Date.now();
      const r = await ct([...RUN, '--workers', 'local:1', '--sandbox', spec, '--yes'], { env: { CT_SSH_KEY: sshd.clientKeyFile, SSH_AUTH_SOCK: '' } });
      assertRefused(r, new RegExp(`--sandbox ${spec}: local workers run their samples there, and this machine cannot use it: .*refused the connection`));
      assert.ok(Date.now() - started < 30_000, `took ${Date.now() - started} ms`);
      await assertNothingCreated();
    });

    test('a host that takes the login passes (the estimate is shown, nothing is created)', async () => {
      const spec = `ssh://${sshd.user}@127.0.0.1:${sshd.port}`;
      const r = await ct([...RUN, '--workers', 'local:1', '--sandbox', spec, '--estimate'], { env: { CT_SSH_KEY: sshd.clientKeyFile, SSH_AUTH_SOCK: '' } });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /^fleet [0-9a-f]{16}: 1 job\(s\)/m);
      assert.match(sshd.log(), /Accepted publickey/, 'the controller logged in');
      await assertNothingCreated();
    });
  });

  describe('5. settings for workers elsewhere', () => {
    for (const [label, args] of [['external', [...RUN, '--workers', 'external', '--yes']], ['EC2', [...EC2_RUN, '--yes']]] as const) {
      test(`${label} workers: a setting that is only a folder here is refused, naming the command that registers it`, async () => {
        const r = await ct([...args], { dir: plain });
        assertRefused(r, /external and EC2 workers pull every setting of the run from git/);
        assert.match(r.stderr, /setting demo is only a folder here .*not registered as a git repository/);
        assert.match(r.stderr, /`ct settings add demo <git URL or path of its repository>`, then `ct settings pull demo`/);
        await assertNothingCreated();
      });
    }

    test('local workers still read the folder in place (the estimate is shown)', async () => {
      const r = await ct([...RUN, '--workers', 'local:1', '--estimate'], { dir: plain });
      assert.equal(r.code, 0, r.stderr);
      await assertNothingCreated();
    });
  });

  describe('6. ct fleet worker --fleet <unknown id>', () => {
    test('exits 2 whether or not the bucket exists, saying there is no such fleet', async () => {
      const missing = await ct(['fleet', 'worker', '--fleet', 'nosuchfleet0']);
      assertRefused(missing, new RegExp(`no such fleet nosuchfleet0 in bucket ${BUCKET} \\(region us-east-1\\); the bucket does not exist there`));
      await assertNothingCreated();

      const s3 = new S3Client({ ...f.aws(), forcePathStyle: true });
      try {
        await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
      } finally {
        s3.destroy();
      }
      const unknown = await ct(['fleet', 'worker', '--fleet', 'nosuchfleet0']);
      assertRefused(unknown, new RegExp(`no such fleet nosuchfleet0 in bucket ${BUCKET} \\(region us-east-1\\): check the id`));
      await assertNothingCreated([BUCKET]);
    });
  });
});

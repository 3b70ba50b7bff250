import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { callerName } from '../../src/cloud/credentials.js';
import { runCt } from '../helpers/cli.js';
import { startEc2World, type Ec2World } from './helpers/ec2-world.js';

const SAMPLE = ['run', 'eval', '--sandbox', 'ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test'];
const SECRET = 'ct-test-secret-9f8e7d';

describe('EC2 credentials are checked before anything is launched', () => {
  let world: Ec2World;

  before(async () => {
    world = await startEc2World({ sshd: false });
  });
  afterEach(async () => {
    await world.reset();
  });
  after(async () => {
    await world?.stop();
  });

  const nothingCreated = async () => {
    assert.deepEqual(await world.instances(), []);
    assert.equal(await world.securityGroup(), undefined);
    assert.equal(world.myIp.hits, 0);
    assert.equal(world.eic.pushes.length, 0);
  };

  test('AWS_PROFILE and AWS_ACCESS_KEY_ID both set: exit 2, says which lines to remove, creates nothing', async () => {
    const r = await runCt(SAMPLE, { env: world.env({ AWS_PROFILE: 'linuxbench-fleet', AWS_SECRET_ACCESS_KEY: SECRET }) });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /AWS_PROFILE \(linuxbench-fleet\) and AWS_ACCESS_KEY_ID are set/);
    assert.match(r.stderr, /remove the AWS_ACCESS_KEY_ID \/ AWS_SECRET_ACCESS_KEY .*lines from your \.env/);
    assert.match(r.stderr, /remove the AWS_PROFILE line instead/);
    assert.ok(!r.stderr.includes(SECRET) && !r.stdout.includes(SECRET), 'no secret printed');
    await nothingCreated();
  });

  test('the same conflict coming from .env is refused too', async () => {
    const cwd = join(world.dir, 'project');
    mkdirSync(cwd, { recursive: true });
    writeFileSync(join(cwd, '.env'), 'AWS_PROFILE=linuxbench-fleet\n');
    const r = await runCt(SAMPLE, { cwd, env: world.env() });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /AWS_PROFILE \(linuxbench-fleet\)/);
    await nothingCreated();
  });

  test('an expired or missing SSO login names the exact `aws sso login --profile` to run', async () => {
    const home = join(world.dir, 'sso-home');
    const cache = join(home, '.aws', 'sso', 'cache');
    mkdirSync(cache, { recursive: true });
    const config = join(home, '.aws', 'config');
    writeFileSync(
      config,
      [
        '[profile ct-sso]',
        'sso_session = corp',
        'sso_account_id = 123456789012',
        'sso_role_name = LinuxbenchFleet',
        'region = us-east-1',
        '[sso-session corp]',
        'sso_start_url = https://example.awsapps.com/start',
        'sso_region = us-east-1',
        'sso_registration_scopes = sso:account:access',
        '',
      ].join('\n'),
    );
    const env = world.env({ AWS_PROFILE: 'ct-sso', AWS_CONFIG_FILE: config, HOME: home });
    delete env.AWS_ACCESS_KEY_ID;
    delete env.AWS_SECRET_ACCESS_KEY;
    // Never logged in: no cached token.
    let r = await runCt(SAMPLE, { env });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /aws sso login --profile ct-sso/);
    // Logged in once, session since expired (the cache file is named by the session's SHA-1).
    const { createHash } = await import('node:crypto');
    writeFileSync(
      join(cache, `${createHash('sha1').update('corp').digest('hex')}.json`),
      JSON.stringify({ startUrl: 'https://example.awsapps.com/start', region: 'us-east-1', accessToken: 'expired', expiresAt: '2020-01-01T00:00:00Z' }),
    );
    r = await runCt(SAMPLE, { env });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /SSO session for profile ct-sso has expired/);
    assert.match(r.stderr, /aws sso login --profile ct-sso/);
    await nothingCreated();
  });

  test('instances are tagged with the IAM user name or the role session name', () => {
    assert.equal(callerName('arn:aws:iam::326120904690:user/henri'), 'henri');
    assert.equal(callerName('arn:aws:iam::326120904690:user/team/alice'), 'alice');
    assert.equal(callerName('arn:aws:sts::326120904690:assumed-role/AWSReservedSSO_LinuxbenchFleet_0123/bob@example.com'), 'bob@example.com');
    assert.equal(callerName('arn:aws:iam::326120904690:root'), 'root');
  });
});

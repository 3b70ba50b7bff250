import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { parseSshSpec } from '../../src/sandbox/ssh/ssh-provider.js';

test('EC2 resource names default to the spec and are overridable by ct.config.yml, env and flags', () => {
  const cwd = mkdtempSync(join(tmpdir(), 'ct-ec2-config-'));
  try {
    const defaults = loadConfig({ cwd, env: {} });
    assert.equal(defaults.ec2.security_group, 'linuxbench-eval-sg');
    assert.equal(defaults.ec2.name_prefix, 'linuxbench-');
    assert.equal(defaults.ec2.instance_type, 'c7i.4xlarge');
    assert.equal(defaults.ec2.region, 'us-east-1');
    assert.equal(defaults.ec2.ami_parameter, '/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id');
    assert.equal(defaults.ec2.ssh_user, 'ubuntu');
    assert.equal(defaults.ec2.keep_instance, false);
    assert.equal(defaults.ec2.ssh_attempts, 10);

    writeFileSync(join(cwd, 'ct.config.yml'), 'ec2:\n  security_group: team-sg\n  name_prefix: team-\n  region: eu-west-1\n');
    writeFileSync(join(cwd, '.env'), 'CT_EC2_NAME_PREFIX=dotenv-\nAWS_PROFILE=from-dotenv\n');
    const layered = loadConfig({
      cwd,
      env: { CT_EC2_REGION: 'us-west-2', CT_EC2_SSH_ENDPOINT: '127.0.0.1:2222', CT_KEEP_EC2_INSTANCE: '1' },
      overrides: { 'ec2.instance_type': 't3.large' },
    });
    assert.equal(layered.ec2.security_group, 'team-sg');
    assert.equal(layered.ec2.name_prefix, 'dotenv-');
    assert.equal(layered.ec2.region, 'us-west-2');
    assert.equal(layered.ec2.instance_type, 't3.large');
    assert.equal(layered.ec2.ssh_endpoint, '127.0.0.1:2222');
    assert.equal(layered.ec2.keep_instance, true);
    assert.equal(layered.aws_env.AWS_PROFILE, 'from-dotenv', '.env AWS settings reach the SDK');

    // EC2 values are checked when the EC2 section is read, so they never block other runs.
    const bad = loadConfig({ cwd, env: { CT_EC2_SSH_ENDPOINT: 'no-port' } });
    assert.throws(() => bad.ec2, (e: unknown) => e instanceof ConfigError && /CT_EC2_SSH_ENDPOINT=no-port \(ec2\.ssh_endpoint\): expected host:port/.test(e.message));
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});

test('ssh:// addresses: user, host, port (22 by default), IPv6 in brackets', () => {
  assert.deepEqual(parseSshSpec('ssh://ubuntu@build-box.internal'), { user: 'ubuntu', host: 'build-box.internal', port: 22 });
  assert.deepEqual(parseSshSpec('ssh://root@127.0.0.1:2222'), { user: 'root', host: '127.0.0.1', port: 2222 });
  assert.deepEqual(parseSshSpec('ssh://me@[::1]:22'), { user: 'me', host: '::1', port: 22 });
  assert.throws(() => parseSshSpec('ssh://me@host/path'), ConfigError);
  assert.throws(() => parseSshSpec('ssh://me:pw@host'), ConfigError);
  assert.throws(() => parseSshSpec('ssh://'), ConfigError);
});

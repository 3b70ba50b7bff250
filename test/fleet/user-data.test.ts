/**
 * The EC2 worker's user-data as EC2 receives it: valid bash, within AWS's 16 KB, every endpoint
 * behind a variable a harness can set, no value that could be a secret.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { USER_DATA_MAX_BYTES, renderUserData, type UserDataOptions } from '../../src/fleet/user-data.js';

const OPTIONS: UserDataOptions = {
  fleetId: '0123456789abcdef',
  region: 'eu-west-3',
  bucket: 'lb-fleet-results-migrated',
  artifactKey: 'artifacts/abc.tar.gz',
  concurrency: 7,
  deadmanMinutes: 210,
  dockerNameParameter: '/linuxbench/docker-org-name',
  dockerPatParameter: "/it's/quoted",
};

test('the user-data is bash -n clean and within 16 KB', () => {
  const script = renderUserData(OPTIONS);
  assert.ok(Buffer.byteLength(script) <= USER_DATA_MAX_BYTES, `${Buffer.byteLength(script)} bytes`);
  assert.ok(script.startsWith('#!/bin/bash\n'));
  execFileSync('bash', ['-n'], { input: script });
  assert.match(script, /^CONCURRENCY=7$/m);
  assert.match(script, /^DEADMAN_MINUTES=210$/m);
  assert.match(script, /^DOCKER_PAT_PARAM='\/it'\\''s\/quoted'$/m, 'values are quoted for bash');
});

test('every endpoint outside the instance is behind a variable; fixed ones are the EC2 defaults', () => {
  const script = renderUserData(OPTIONS);
  assert.match(script, /IMDS="\$\{CT_IMDS_ENDPOINT:-http:\/\/169\.254\.169\.254\}"/);
  assert.match(script, /NODE_SETUP_URL="\$\{CT_NODE_SETUP_URL:-https:\/\/deb\.nodesource\.com\/setup_20\.x\}"/);
  assert.match(script, /ROOT="\$\{CT_BOOT_ROOT:-\}"/);
  const urls = script.match(/https?:\/\/[^\s"'}]+/g) ?? [];
  assert.deepEqual([...new Set(urls)].sort(), ['http://169.254.169.254', 'https://deb.nodesource.com/setup_20.x']);
});

test('containers cannot reach the instance metadata: the bootstrap drops their traffic to it before the worker starts', () => {
  const script = renderUserData(OPTIONS);
  assert.match(script, /iptables -I DOCKER-USER -d 169\.254\.169\.254 -j DROP/);
  const firewall = script.indexOf('step block-container-imds block_container_imds');
  assert.ok(firewall > script.indexOf('step install-base install_base'), 'after Docker is installed');
  assert.ok(firewall < script.indexOf('fleet worker --fleet'), 'before the worker runs a container');
});

test('no secret reaches the user-data: registry credentials are read from SSM at boot', () => {
  const script = renderUserData(OPTIONS);
  assert.doesNotMatch(script, /AKIA|sk-ant|dckr_pat|ANTHROPIC_API_KEY|OPENAI_API_KEY|AWS_SECRET_ACCESS_KEY/);
  assert.match(script, /aws ssm get-parameter --name "\$DOCKER_PAT_PARAM" --with-decryption/);
});

test('user-data over 16 KB is refused before any launch', () => {
  assert.throws(() => renderUserData({ ...OPTIONS, dockerNameParameter: 'x'.repeat(USER_DATA_MAX_BYTES) }), (e) => e instanceof ConfigError && /at most 16384/.test(e.message));
});

test('a worker adapts its concurrency unless the run fixed it, and its instance ends when the worker exits (idle exit included)', () => {
  const { concurrency: _, ...adaptive } = OPTIONS;
  const script = renderUserData(adaptive);
  execFileSync('bash', ['-n'], { input: script });
  assert.match(script, /^CONCURRENCY=$/m);
  const run = script.split('\n').find((l) => l.includes('bin/ct.js fleet worker'))!;
  assert.match(run, /\$\{CONCURRENCY:\+--concurrency "\$CONCURRENCY"\}/, '--concurrency only when the run gave one');
  // Whatever the worker's exit (done, fleet gone, idle for fleet.idle_minutes), the script halts the
  // instance, whose shutdown behaviour is `terminate` (ec2-launcher.ts).
  const after = script.slice(script.indexOf(run));
  assert.match(after, /finish "worker done" 0/);
  assert.match(script, /finish\(\) \{[^}]*shutdown -h now/);
});

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { LocalRunner } from '../../src/host/local-runner.js';
import { DockerProvider } from '../../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../../src/sandbox/run-registry.js';
import { ctEnv, runCt } from '../helpers/cli.js';
import { FIXTURES } from '../helpers/paths.js';

/**
 * The sample-network pool must be a private range with room for one /26: a public or malformed
 * range would hand sandboxes addresses of real hosts (or fail inside Docker later).
 */
describe('the sample network pool accepts only private ranges with room for a network', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-net-pool-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function refused(env: Record<string, string>, message: RegExp) {
    const logs = join(work, 'logs');
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--log-dir', logs], { cwd: work, env: ctEnv(env) });
    assert.equal(r.code, 2, `exit code (stderr: ${r.stderr})`);
    assert.match(r.stderr, message);
    assert.equal(existsSync(logs), false, 'nothing started');
    return r.stderr;
  }

  const cases: Array<[string, RegExp]> = [
    ['300.1.0.0/16', /not a valid IPv4 range/],
    ['0.0.0.0/0', /0\.0\.0\.0\/0 is not a private range/],
    ['8.8.0.0/16', /8\.8\.0\.0\/16 is not a private range.*10\.0\.0\.0\/8, 172\.16\.0\.0\/12, 192\.168\.0\.0\/16/],
    ['172.32.0.0/16', /not a private range/],
    ['10.0.0.0/27', /smaller than one sample network \(\/26/],
    ['10.213.1.0/16', /host bits set; did you mean 10\.213\.0\.0\/16/],
    ['10.213.0.0', /not an IPv4 range like/],
  ];
  for (const [value, message] of cases) {
    test(`CT_NETWORK_POOL=${value} exits 2 naming the variable and the reason`, async () => {
      const err = await refused({ CT_NETWORK_POOL: value }, message);
      assert.match(err, /CT_NETWORK_POOL/);
      assert.match(err, /sandbox\.network_pool/);
    });
  }

  test('sandbox.network_pool in ct.config.yml is checked the same way', async () => {
    writeFileSync(join(work, 'ct.config.yml'), 'sandbox:\n  network_pool: 0.0.0.0/0\n');
    try {
      await refused({}, /sandbox\.network_pool \(from ct\.config\.yml\): 0\.0\.0\.0\/0 is not a private range/);
    } finally {
      rmSync(join(work, 'ct.config.yml'));
    }
  });

  test('a private /24 pool and `docker` are accepted; sample networks come from the pool', async () => {
    const runId = newRunId();
    const registry = new RunRegistry(join(work, 'state'));
    registry.register(runId);
    const provider = new DockerProvider({ runner: new LocalRunner(), runId, registry, networkPool: '10.250.64.0/24' });
    const env = { name: 'tiny', composeFile: join(FIXTURES, 'tiny', 'compose.yml') };
    try {
      await provider.sampleInit(env, { label: 'pool-range' });
      const nets = execFileSync('docker', ['network', 'ls', '--quiet', '--filter', `name=ct-${runId}-`], { encoding: 'utf8' }).trim().split('\n');
      assert.equal(nets.length, 1);
      const subnet = execFileSync('docker', ['network', 'inspect', '--format', '{{(index .IPAM.Config 0).Subnet}}', nets[0]!], { encoding: 'utf8' }).trim();
      assert.match(subnet, /^10\.250\.64\.(0|64|128|192)\/26$/);
    } finally {
      await provider.taskCleanup();
      registry.unregister(runId);
    }
    assert.throws(() => new DockerProvider({ runner: new LocalRunner(), runId, registry, networkPool: '8.8.8.0/24' }), /not a private range/);
    new DockerProvider({ runner: new LocalRunner(), runId, registry, networkPool: 'docker' });
  });
});

/**
 * Fleet secrets in SSM (moto): SecureString parameters under the fleet's path, tagged with the
 * fleet id, read back by a worker, replaced on resume, deleted at the end, never quoted in errors.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { GetParameterCommand, ListTagsForResourceCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configSchema } from '../../src/config/config.js';
import { clearSecrets, redactSecrets } from '../../src/config/secret-registry.js';
import { FleetEventsLog } from '../../src/fleet/events-log.js';
import { CloudError, ConfigError } from '../../src/errors.js';
import { deleteFleetSecrets, fleetSecretsFromConfig, fleetSecretsPath, putFleetSecrets, readFleetSecrets, replaceFleetSecrets } from '../../src/fleet/secrets.js';
import { takeFleetSecrets } from '../../src/fleet/worker-secrets.js';
import { startMoto, type Moto } from '../helpers/moto.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const PREFIX = '/ct-test/fleet/';
let moto: Moto;
let ssm: SSMClient;

describe('fleet secrets in SSM', () => {
  before(async () => {
    moto = await startMoto();
    ssm = new SSMClient({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
  });
  after(async () => moto?.stop());

  test('keys are stored as SecureString parameters scoped and tagged to the fleet, and a worker reads them back', async () => {
    const names = await putFleetSecrets(ssm, PREFIX, 'fleet1', { ANTHROPIC_API_KEY: 'sk-ant-fake-1', OPENAI_API_KEY: 'sk-fake-2' });
    assert.deepEqual(names.sort(), ['/ct-test/fleet/fleet1/ANTHROPIC_API_KEY', '/ct-test/fleet/fleet1/OPENAI_API_KEY']);
    const p = await ssm.send(new GetParameterCommand({ Name: names[0] }));
    assert.equal(p.Parameter?.Type, 'SecureString');
    const tags = await ssm.send(new ListTagsForResourceCommand({ ResourceType: 'Parameter', ResourceId: names[0] }));
    assert.deepEqual(tags.TagList, [{ Key: 'FleetId', Value: 'fleet1' }]);
    await putFleetSecrets(ssm, PREFIX, 'fleet2', { ANTHROPIC_API_KEY: 'sk-ant-other' });
    assert.deepEqual(await readFleetSecrets(ssm, PREFIX, 'fleet1'), { ANTHROPIC_API_KEY: 'sk-ant-fake-1', OPENAI_API_KEY: 'sk-fake-2' });
  });

  test('a resumed fleet replaces its values; deleting removes only that fleet\'s parameters', async () => {
    await putFleetSecrets(ssm, PREFIX, 'fleet3', { ANTHROPIC_API_KEY: 'old' });
    await putFleetSecrets(ssm, PREFIX, 'fleet3', { ANTHROPIC_API_KEY: 'new' });
    assert.deepEqual(await readFleetSecrets(ssm, PREFIX, 'fleet3'), { ANTHROPIC_API_KEY: 'new' });
    await putFleetSecrets(ssm, PREFIX, 'fleet4', { OPENAI_API_KEY: 'keep' });
    assert.deepEqual(await deleteFleetSecrets(ssm, PREFIX, 'fleet3'), ['/ct-test/fleet/fleet3/ANTHROPIC_API_KEY']);
    assert.deepEqual(await readFleetSecrets(ssm, PREFIX, 'fleet3'), {});
    assert.deepEqual(await readFleetSecrets(ssm, PREFIX, 'fleet4'), { OPENAI_API_KEY: 'keep' });
    assert.deepEqual(await deleteFleetSecrets(ssm, PREFIX, 'fleet3'), [], 'deleting twice is fine');
  });

  test('a name that is not an environment variable is a usage error and nothing is stored', async () => {
    await assert.rejects(putFleetSecrets(ssm, PREFIX, 'fleet5', { GOOD: 'v', 'BAD-NAME': 'v' }), ConfigError);
    assert.deepEqual(await readFleetSecrets(ssm, PREFIX, 'fleet5'), {});
  });

  test('a refused write names the parameter, never the value', async () => {
    // SSM reserves /aws/ for its own parameters and refuses writes there.
    const secret = `sk-${'x'.repeat(40)}`;
    await assert.rejects(putFleetSecrets(ssm, '/aws/ct-test/', 'fleet6', { ANTHROPIC_API_KEY: secret }), (e: unknown) => {
      assert.ok(e instanceof CloudError, String(e));
      assert.match(e.message, /\/aws\/ct-test\/fleet6\/ANTHROPIC_API_KEY/);
      assert.equal(e.retryable, false);
      assert.ok(!e.message.includes('xxxxxxxx') && !JSON.stringify(e.cause ?? null).includes('xxxxxxxx'));
      return true;
    });
  });

  test('the path and the keys taken from config', () => {
    assert.equal(fleetSecretsPath('linuxbench/fleet', 'abc'), '/linuxbench/fleet/abc/');
    const config = configSchema.parse({ models: { anthropic: { api_key: 'a' } }, git: { token: 'g' } });
    assert.deepEqual(fleetSecretsFromConfig(config), { ANTHROPIC_API_KEY: 'a', GITHUB_TOKEN: 'g' });
    const docker = configSchema.parse({ models: { openai: { api_key: 'o' } }, fleet: { docker_org_name: 'org', docker_org_pat: 'pat' } });
    assert.deepEqual(fleetSecretsFromConfig(docker), { OPENAI_API_KEY: 'o', DOCKER_ORG_NAME: 'org', DOCKER_ORG_PAT: 'pat' });
  });

  test('a resumed controller replaces the set: new values stored, a key no longer set here removed', async () => {
    await putFleetSecrets(ssm, PREFIX, 'fleet7', { ANTHROPIC_API_KEY: 'old', OPENAI_API_KEY: 'gone-now' });
    assert.deepEqual(await replaceFleetSecrets(ssm, PREFIX, 'fleet7', { ANTHROPIC_API_KEY: 'new' }), ['/ct-test/fleet/fleet7/ANTHROPIC_API_KEY']);
    assert.deepEqual(await readFleetSecrets(ssm, PREFIX, 'fleet7'), { ANTHROPIC_API_KEY: 'new' });
  });

  test("a worker takes the fleet's keys it does not set itself; its own values win", async () => {
    await putFleetSecrets(ssm, PREFIX, 'fleet8', { ANTHROPIC_API_KEY: 'from-ssm-a', OPENAI_API_KEY: 'from-ssm-o', GITHUB_TOKEN: 'from-ssm-g' });
    const env: NodeJS.ProcessEnv = { OPENAI_API_KEY: 'worker-env' };
    // GITHUB_TOKEN set by the worker's own config (.env or ct.config.yml), not its environment.
    const got = await takeFleetSecrets(ssm, PREFIX, 'fleet8', { GITHUB_TOKEN: 'worker-config' }, env);
    assert.deepEqual(got, { taken: ['ANTHROPIC_API_KEY'], kept: ['GITHUB_TOKEN', 'OPENAI_API_KEY'] });
    assert.deepEqual(env, { OPENAI_API_KEY: 'worker-env', ANTHROPIC_API_KEY: 'from-ssm-a' });
    assert.deepEqual(await takeFleetSecrets(ssm, PREFIX, 'no-such-fleet', {}, {}), { taken: [], kept: [] }, 'a fleet without secrets is fine');
  });

  test("the fleet's secrets a worker reads are redacted from what it writes, the registry's public name is not", async () => {
    await putFleetSecrets(ssm, PREFIX, 'fleet10', { OPENAI_API_KEY: 'sk-fleet-only-value-123', DOCKER_ORG_NAME: 'examplecorp', DOCKER_ORG_PAT: 'dckr_pat_fleet_value' });
    await takeFleetSecrets(ssm, PREFIX, 'fleet10', {}, {});
    try {
      assert.equal(
        redactSecrets('401 from proxy: Bearer sk-fleet-only-value-123; login examplecorp with dckr_pat_fleet_value'),
        '401 from proxy: Bearer ***[OPENAI_API_KEY]; login examplecorp with ***[DOCKER_ORG_PAT]',
      );
      // A worker's events reach the controller's events.jsonl; an error quoting a key is redacted there too.
      const dir = mkdtempSync(join(tmpdir(), 'ct-events-'));
      const events = new FleetEventsLog(dir, 'fleet10');
      events.add('job_failed', { job_id: 'j1', error: 'model call failed: invalid key sk-fleet-only-value-123' });
      const line = readFileSync(events.path, 'utf8');
      assert.ok(!line.includes('sk-fleet-only-value-123'), line);
      assert.match(line, /invalid key \*\*\*\[OPENAI_API_KEY\]/);
    } finally {
      clearSecrets();
    }
  });

  test('a worker that may not read the parameters is told what permission it needs, or to use --secrets env', async () => {
    // moto does not enforce IAM: a loopback server answers as SSM does to a role without the permission.
    const denied = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': 'AccessDeniedException' });
        res.end(JSON.stringify({ __type: 'AccessDeniedException', message: 'User is not authorized to perform: ssm:GetParametersByPath' }));
      });
    });
    await new Promise<void>((resolve) => denied.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(denied.address() as AddressInfo).port}`;
    const client = new SSMClient({ region: 'us-east-1', endpoint, credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' }, maxAttempts: 1 });
    try {
      await assert.rejects(takeFleetSecrets(client, PREFIX, 'fleet9', {}, {}), (e: unknown) => {
        assert.ok(e instanceof CloudError, String(e));
        assert.equal(e.retryable, false);
        assert.match(e.message, /AccessDenied.*ssm:GetParametersByPath on \/ct-test\/fleet\/fleet9\/\* \(an EC2 worker's role: `ct cloud iam-policy --role worker`\); or start it with --secrets env/);
        return true;
      });
    } finally {
      client.destroy();
      denied.close();
    }
  });
});

/**
 * `scripts/put_docker_org_auth_ssm.sh` (which runs `ct cloud put-docker-auth`) stores the registry
 * credentials from `.env` in SSM under the spec's names, the PAT as SecureString, against moto.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { ctEnv, runCt } from '../helpers/cli.js';
import { FAKE_AWS } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { clientConfig } from './seed.js';

const PAT = 'dckr_pat_FAKE0123456789';

describe('ct cloud put-docker-auth', () => {
  let moto: Moto;
  let cwd: string;
  let ssm: SSMClient;
  const env = (extra: Record<string, string> = {}) => {
    const e = ctEnv({ ...FAKE_AWS, AWS_ENDPOINT_URL: moto.url, ...extra });
    for (const k of ['AWS_PROFILE', 'DOCKER_ORG_NAME', 'DOCKER_ORG_PAT', 'DOCKER_ORG_NAME_SSM_PARAM', 'DOCKER_ORG_PAT_SSM_PARAM']) if (!(k in extra)) delete e[k];
    return e;
  };
  const param = async (Name: string) => (await ssm.send(new GetParameterCommand({ Name, WithDecryption: true }))).Parameter!;

  before(async () => {
    moto = await startMoto();
    ssm = new SSMClient(clientConfig(moto));
  });
  beforeEach(async () => {
    await moto.reset();
    cwd = mkdtempSync(join(tmpdir(), 'ct-docker-auth-'));
  });
  after(async () => {
    ssm.destroy();
    await moto.stop();
    rmSync(cwd, { recursive: true, force: true });
  });

  test('the script stores the name as String and the PAT as SecureString; a second run replaces them; names follow the *_SSM_PARAM variables; the PAT is never printed', async () => {
    writeFileSync(join(cwd, '.env'), `DOCKER_ORG_NAME=acme-evals\nDOCKER_ORG_PAT=${PAT}\n`);
    const r = spawnSync('bash', [join(REPO_ROOT, 'scripts', 'put_docker_org_auth_ssm.sh')], { cwd, env: env(), encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'stored /linuxbench/docker-org-name (String) and /linuxbench/docker-org-pat (SecureString) in us-east-1\n');
    const name = await param('/linuxbench/docker-org-name');
    const pat = await param('/linuxbench/docker-org-pat');
    assert.deepEqual([name.Type, name.Value, pat.Type, pat.Value], ['String', 'acme-evals', 'SecureString', PAT]);

    // Again with new values, the PAT's parameter renamed in .env: the name is replaced, the PAT goes to the new parameter.
    writeFileSync(join(cwd, '.env'), 'DOCKER_ORG_NAME=acme-2\nDOCKER_ORG_PAT=dckr_pat_SECOND\nDOCKER_ORG_PAT_SSM_PARAM=/team/registry-pat\n');
    const again = await runCt(['cloud', 'put-docker-auth'], { cwd, env: env() });
    assert.equal(again.code, 0, again.stderr);
    assert.equal((await param('/linuxbench/docker-org-name')).Value, 'acme-2');
    const moved = await param('/team/registry-pat');
    assert.deepEqual([moved.Type, moved.Value], ['SecureString', 'dckr_pat_SECOND']);
    assert.equal((await param('/linuxbench/docker-org-pat')).Value, PAT);
    assert.ok(![r.stdout, r.stderr, again.stdout, again.stderr].some((t) => t.includes('dckr_pat')));
  });

  test('a missing PAT: exit 2 naming it, nothing stored', async () => {
    writeFileSync(join(cwd, '.env'), 'DOCKER_ORG_NAME=acme\n');
    const r = await runCt(['cloud', 'put-docker-auth'], { cwd, env: env() });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /DOCKER_ORG_PAT is not set; put them in \.env/);
    await assert.rejects(param('/linuxbench/docker-org-name'), /ParameterNotFound/);
  });
});

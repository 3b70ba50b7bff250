import assert from 'node:assert/strict';
import { EC2InstanceConnectClient } from '@aws-sdk/client-ec2-instance-connect';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { KnownHosts } from '../../src/host/known-hosts.js';
import { SshRunner } from '../../src/host/ssh-runner.js';
import { InstanceConnectKey } from '../../src/sandbox/ec2/instance-connect-key.js';
import { startInstanceConnectFake, type InstanceConnectFake } from '../helpers/instance-connect-fake.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';

const INSTANCE = 'i-0123456789abcdef0';

describe('EC2 Instance Connect keys: pushed right before connecting, good for 60 s', () => {
  let eic: InstanceConnectFake;
  let sshd: Sshd;
  let dir: string;
  let client: EC2InstanceConnectClient;

  before(async () => {
    eic = await startInstanceConnectFake({ instanceState: async (id) => (id === INSTANCE ? 'running' : undefined) });
    sshd = await startSshd({ authorizedKeysScript: eic.authorizedKeysScript() });
    dir = mkdtempSync(join(tmpdir(), 'ct-eic-'));
    client = new EC2InstanceConnectClient({
      region: 'us-east-1',
      endpoint: eic.url,
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    });
  });

  after(async () => {
    await sshd?.stop();
    await eic?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const runnerFor = (key: InstanceConnectKey) =>
    new SshRunner({
      host: sshd.host,
      port: sshd.port,
      username: sshd.user,
      auth: { keys: [{ source: 'instance connect key', key: Buffer.from(key.privateKey) }], skipped: [] },
      knownHosts: new KnownHosts(join(dir, 'known_hosts')),
      hostKeyAlias: INSTANCE,
      beforeConnect: () => key.ensurePushed(),
    });

  test('a pushed key logs in; the same key pushed more than 60 s earlier is refused; a fresh push works again', async () => {
    const key = new InstanceConnectKey(client, INSTANCE, sshd.user);
    const first = runnerFor(key);
    assert.equal((await first.run(['echo', 'in'])).stdout.toString(), 'in\n');
    assert.equal(eic.pushes.length, 1);
    assert.equal(eic.pushes[0]!.publicKey, key.publicKey.split(' ').slice(0, 2).join(' '));

    // An established connection outlives the key.
    eic.advance(61_000);
    assert.equal((await first.run(['echo', 'still'])).stdout.toString(), 'still\n');
    await first.close();

    // A new login with the expired key fails...
    const late = runnerFor(key);
    await assert.rejects(late.connect(), /did not accept any key/);
    // ...and succeeds once the key is pushed again.
    key.invalidate();
    await late.connect();
    assert.equal(eic.pushes.length, 2);
    await late.close();
  });

  test('each instance gets its own throwaway key pair', () => {
    const a = new InstanceConnectKey(client, INSTANCE, 'root');
    const b = new InstanceConnectKey(client, INSTANCE, 'root');
    assert.match(a.publicKey, /^ssh-ed25519 /);
    assert.notEqual(a.publicKey, b.publicKey);
  });

  test('a key for another OS user does not log in as this one', async () => {
    const key = new InstanceConnectKey(client, INSTANCE, 'someone-else');
    await assert.rejects(runnerFor(key).connect(), /did not accept any key/);
  });

  test('pushing for an instance that does not exist fails with the service error', async () => {
    const key = new InstanceConnectKey(client, 'i-00000000000000000', sshd.user);
    await assert.rejects(key.ensurePushed(), /EC2InstanceNotFoundException/);
  });
});

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { HostKeyChangedError, KnownHosts } from '../../src/host/known-hosts.js';
import { discoverSshAuth, type SshAuth } from '../../src/host/ssh-auth.js';
import { SshRunner } from '../../src/host/ssh-runner.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';

describe('SSH host keys (trust on first use) and login credentials', () => {
  let sshd: Sshd;
  let dir: string;
  let knownHostsFile: string;
  const runner = (auth: SshAuth, port = sshd.port) =>
    new SshRunner({ host: '127.0.0.1', port, username: sshd.user, auth, knownHosts: new KnownHosts(knownHostsFile) });

  before(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), 'ct-ssh-keys-'));
    knownHostsFile = join(dir, 'state', 'known_hosts');
  });

  after(async () => {
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the first connection records the host key in OpenSSH format; later ones accept it', async () => {
    const r1 = runner(discoverSshAuth({ keyFile: sshd.clientKeyFile }));
    await r1.connect();
    await r1.close();
    const name = `[127.0.0.1]:${sshd.port}`;
    const line = readFileSync(knownHostsFile, 'utf8').trim();
    const [type, blob] = sshd.hostPublicKey.split(' ');
    assert.equal(line, `${name} ${type} ${blob}`);
    // OpenSSH's own tools read the file.
    const found = execFileSync('ssh-keygen', ['-F', name, '-f', knownHostsFile]).toString();
    assert.match(found, new RegExp(blob!.replace(/[+/]/g, '\\$&')));
    const r2 = runner(discoverSshAuth({ keyFile: sshd.clientKeyFile }));
    assert.equal((await r2.run(['echo', 'again'])).stdout.toString(), 'again\n');
    await r2.close();
    assert.equal(readFileSync(knownHostsFile, 'utf8').trim().split('\n').length, 1);
  });

  test('a host whose key changed is refused with instructions, before logging in', async () => {
    const port = sshd.port;
    await sshd.stop();
    sshd = await startSshd({ port }); // same address, new host key
    const r = runner(discoverSshAuth({ keyFile: sshd.clientKeyFile }));
    await assert.rejects(r.connect(), (e: unknown) => {
      assert.ok(e instanceof HostKeyChangedError, String(e));
      assert.match(e.message, /has changed/);
      assert.ok(e.message.includes(knownHostsFile));
      assert.match(e.message, /line 1/);
      return true;
    });
    assert.doesNotMatch(sshd.log(), /Accepted publickey/);
    // After the user removes the stale line, the new key is trusted.
    new KnownHosts(knownHostsFile).forget(`[127.0.0.1]:${port}`);
    const again = runner(discoverSshAuth({ keyFile: sshd.clientKeyFile }));
    await again.connect();
    await again.close();
  });

  test('a key the host does not accept fails with what was tried and what to do', async () => {
    const other = join(dir, 'other_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', other]);
    const r = runner(discoverSshAuth({ keyFile: other }));
    await assert.rejects(r.connect(), (e: Error) => {
      assert.match(e.message, /did not accept any key/);
      assert.ok(e.message.includes(other));
      assert.match(e.message, /--ssh-key/);
      return true;
    });
  });

  test('a passphrase-protected --ssh-key is refused with the ssh-add hint', () => {
    const locked = join(dir, 'locked_ed25519');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'secret-pass', '-f', locked]);
    assert.throws(
      () => discoverSshAuth({ keyFile: locked }),
      (e: unknown) => e instanceof ConfigError && /ssh-add/.test(e.message) && !e.message.includes('secret-pass'),
    );
  });

  test('without --ssh-key, ~/.ssh/id_ed25519 and id_rsa are found and encrypted ones skipped', () => {
    const home = join(dir, 'home');
    mkdirSync(join(home, '.ssh'), { recursive: true });
    copyFileSync(sshd.clientKeyFile, join(home, '.ssh', 'id_ed25519'));
    execFileSync('ssh-keygen', ['-q', '-t', 'rsa', '-b', '2048', '-N', 'pw', '-f', join(home, '.ssh', 'id_rsa')]);
    const auth = discoverSshAuth({ home, agent: join(dir, 'no-such-agent.sock') });
    assert.deepEqual(
      auth.keys.map((k) => k.source),
      [join(home, '.ssh', 'id_ed25519')],
    );
    assert.equal(auth.agent, undefined);
    assert.match(auth.skipped.join(), /id_rsa \(needs a passphrase\)/);
  });

  test('keys held by ssh-agent (SSH_AUTH_SOCK) log in', async (t) => {
    const sock = join(dir, 'agent.sock');
    const agent = spawnSync('ssh-agent', ['-a', sock, '-s']);
    if (agent.status !== 0) return t.skip('ssh-agent is not installed');
    const pid = /SSH_AGENT_PID=(\d+)/.exec(agent.stdout.toString())?.[1];
    try {
      execFileSync('ssh-add', ['-q', sshd.clientKeyFile], { env: { ...process.env, SSH_AUTH_SOCK: sock } });
      const auth = discoverSshAuth({ agent: sock, home: join(dir, 'empty-home') });
      assert.equal(auth.agent, sock);
      assert.equal(auth.keys.length, 0);
      const r = runner(auth);
      assert.equal((await r.run(['echo', 'via agent'])).stdout.toString(), 'via agent\n');
      await r.close();
    } finally {
      if (pid) process.kill(Number(pid));
    }
  });
});

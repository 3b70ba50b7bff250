import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { KnownHosts } from '../../src/host/known-hosts.js';
import { discoverSshAuth } from '../../src/host/ssh-auth.js';
import { SshConnectionError, SshRunner } from '../../src/host/ssh-runner.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';

describe('SshRunner against a loopback sshd', () => {
  let sshd: Sshd;
  let state: string;
  let runner: SshRunner;

  const newRunner = () =>
    new SshRunner({
      host: sshd.host,
      port: sshd.port,
      username: sshd.user,
      auth: discoverSshAuth({ keyFile: sshd.clientKeyFile }),
      knownHosts: new KnownHosts(join(state, 'known_hosts')),
    });

  /** Logins sshd accepted so far (one per SSH connection). */
  const logins = () => (sshd.log().match(/Accepted publickey/g) ?? []).length;

  /** sshd's per-connection processes (children of the listener), to cut connections for real. */
  const dropConnections = () => {
    const listener = readFileSync(join(sshd.dir, 'sshd.pid'), 'utf8').trim();
    const kids = execFileSync('sh', ['-c', `pgrep -P ${listener} || true`]).toString().split('\n').filter(Boolean);
    for (const pid of kids) process.kill(Number(pid), 'SIGKILL');
    return kids.length;
  };

  before(async () => {
    sshd = await startSshd();
    state = mkdtempSync(join(tmpdir(), 'ct-ssh-state-'));
    runner = newRunner();
  });

  after(async () => {
    await runner?.close();
    await sshd?.stop();
    rmSync(state, { recursive: true, force: true });
  });

  test('argv reaches the remote program word for word, whatever it contains', async () => {
    const words = ['plain', 'two words', "it's", '$HOME', '`id`', 'a\nb', '*', '', 'é ✓ 🚀', '--', '-n', '\\', '"q"'];
    const r = await runner.run(['python3', '-c', 'import json,sys; print(json.dumps(sys.argv[1:]))', ...words]);
    assert.equal(r.code, 0, r.stderr.toString());
    assert.deepEqual(JSON.parse(r.stdout.toString()), words);
  });

  test('stdout, stderr and the exit code come back separately', async () => {
    const r = await runner.run(['sh', '-c', 'echo out; echo err >&2; exit 7']);
    assert.deepEqual([r.code, r.stdout.toString(), r.stderr.toString(), r.timedOut], [7, 'out\n', 'err\n', false]);
  });

  test('stdin is passed as text and as bytes; environment variables are set', async () => {
    assert.equal((await runner.run(['cat'], { input: 'line1\nline2' })).stdout.toString(), 'line1\nline2');
    const bytes = Buffer.from([0, 1, 2, 255, 10, 13]);
    assert.deepEqual((await runner.run(['cat'], { input: bytes })).stdout, bytes);
    const r = await runner.run(['sh', '-c', 'printf "%s|%s" "$FOO" "$BAR"'], { env: { FOO: "a 'b' $c", BAR: 'é' } });
    assert.equal(r.stdout.toString(), "a 'b' $c|é");
  });

  test('a missing program fails with exit code 127', async () => {
    const r = await runner.run(['ct-no-such-program-xyz']);
    assert.equal(r.code, 127);
  });

  test('a timeout kills the remote program and reports timedOut promptly', async () => {
    const seconds = 3000 + Math.floor(Math.random() * 1000);
    const started = Date.now();
    const r = await runner.run(['sh', '-c', `echo started; sleep ${seconds}; echo never`], { timeoutMs: 500 });
    assert.equal(r.timedOut, true);
    assert.equal(r.code, null);
    assert.equal(r.stdout.toString(), 'started\n');
    assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
    await new Promise((res) => setTimeout(res, 300));
    const left = spawnSync('pgrep', ['-f', `sleep ${seconds}`]).stdout.toString().trim();
    assert.equal(left, '', 'the remote program and its children were killed');
  });

  test('an abort signal kills the remote program', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const started = Date.now();
    const r = await runner.run(['sleep', '200'], { signal: ac.signal });
    assert.equal(r.code, null);
    assert.ok(Date.now() - started < 3000);
  });

  test('output past maxOutput keeps the tail and says it was truncated', async () => {
    const r = await runner.run(['sh', '-c', 'seq 1 100000'], { maxOutput: 1000 });
    assert.equal(r.stdoutTruncated, true);
    assert.equal(r.stdout.length, 1000);
    assert.ok(r.stdout.toString().endsWith('99999\n100000\n'));
  });

  test('sequential calls share one connection (no new login per call)', async () => {
    await runner.run(['true']);
    const before = logins();
    for (let i = 0; i < 15; i++) assert.equal((await runner.run(['echo', String(i)])).stdout.toString(), `${i}\n`);
    assert.equal(logins(), before);
  });

  test("many concurrent calls beyond sshd's MaxSessions (10) succeed on few connections", async () => {
    const rs = await Promise.all(Array.from({ length: 30 }, (_, i) => runner.run(['sh', '-c', `sleep 0.3; echo ${i}`])));
    rs.forEach((r, i) => assert.equal(r.stdout.toString(), `${i}\n`));
    assert.ok(runner.connectionCount <= 5, `${runner.connectionCount} connections`);
  });

  test('start() gives a long-lived program with open pipes; kill() ends it', async () => {
    const p = await runner.start(['sh', '-c', 'while read l; do echo "got $l"; echo "e $l" >&2; done']);
    let out = '';
    let err = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    p.stderr.on('data', (c: Buffer) => (err += c.toString()));
    p.stdin.write('one\n');
    p.stdin.write('two\n');
    for (let i = 0; i < 50 && !out.includes('got two'); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(out, 'got one\ngot two\n');
    assert.equal(err, 'e one\ne two\n');
    p.kill();
    assert.equal(await p.exited, null);
    const q = await runner.start(['cat']);
    let echoed = '';
    q.stdout.on('data', (c: Buffer) => (echoed += c.toString()));
    q.stdin.end('bye');
    assert.equal(await q.exited, 0);
    assert.equal(echoed, 'bye');
  });

  test('writeFile creates parents in the private scratch folder; removeFile removes', async () => {
    const mode = (await runner.run(['stat', '-c', '%a', runner.scratchDir])).stdout.toString().trim();
    assert.equal(mode, '700');
    const file = `${runner.scratchDir}/a/b/over.yml`;
    await runner.writeFile(file, 'services: {}\n');
    assert.equal((await runner.run(['cat', file])).stdout.toString(), 'services: {}\n');
    await runner.removeFile(file);
    assert.equal((await runner.run(['test', '-e', file])).code, 1);
  });

  test('a connection that drops between calls is re-established on the next call', async () => {
    await runner.run(['true']);
    assert.ok(dropConnections() > 0);
    await new Promise((r) => setTimeout(r, 200));
    const r = await runner.run(['echo', 'back']);
    assert.equal(r.stdout.toString(), 'back\n');
  });

  test('a command whose connection drops while it runs fails as a connection error', async () => {
    await runner.run(['true']);
    const running = runner.run(['sleep', '30']);
    await new Promise((r) => setTimeout(r, 300));
    dropConnections();
    await assert.rejects(running, SshConnectionError);
    assert.equal((await runner.run(['echo', 'ok'])).stdout.toString(), 'ok\n');
  });

  test('close() removes the scratch folder', async () => {
    const r2 = newRunner();
    await r2.connect();
    const dir = r2.scratchDir;
    assert.equal((await r2.run(['test', '-d', dir])).code, 0);
    await r2.close();
    assert.equal((await runner.run(['test', '-e', dir])).code, 1);
  });
});

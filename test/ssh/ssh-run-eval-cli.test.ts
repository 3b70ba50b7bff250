import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { ctEnv, runCt } from '../helpers/cli.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';

/** `ct run eval --sandbox ssh://...` end to end: this machine's Docker, reached through a loopback sshd. */
describe('ct run eval --sandbox ssh://user@host:port', () => {
  let sshd: Sshd;
  let dir: string;
  let trajectory: string;
  const spec = () => `ssh://${sshd.user}@127.0.0.1:${sshd.port}`;
  const env = () => ctEnv({ CT_STATE_DIR: join(dir, 'state'), CT_LOG_DIR: join(dir, 'logs'), SSH_AUTH_SOCK: '' });
  const logins = () => (sshd.log().match(/Accepted publickey/g) ?? []).length;
  const stagedEnvs = () => {
    const root = join(sshd.home, '.ct', 'envs');
    return existsSync(root) ? readdirSync(root) : [];
  };

  before(async () => {
    sshd = await startSshd();
    dir = mkdtempSync(join(tmpdir(), 'ct-ssh-cli-'));
    trajectory = join(dir, 'fetch-status.jsonl');
    writeFileSync(
      trajectory,
      [
        { function: 'bash', arguments: { cmd: 'fetch http://store:8080/status.txt > /srv/status.txt' } },
        { function: 'submit', arguments: { answer: 'done' } },
      ]
        .map((l) => JSON.stringify(l))
        .join('\n'),
    );
  });

  after(async () => {
    await sshd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a sample with a built image and a bind-mounted folder runs and scores on the remote host', async () => {
    const r = await runCt(
      ['run', 'eval', '-e', 'kv_service', '-t', 'fetch_status', '--policy', 'replay', '--trajectory', trajectory,
        '--sandbox', spec(), '--ssh-key', sshd.clientKeyFile, '--json'],
      { env: env() },
    );
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(out.status, 'success');
    assert.deepEqual(out.samples.map((s: { scores?: Record<string, string>; error?: string }) => [s.scores?.main_task_success, s.error]), [['C', undefined]]);
    // The compose folder was shipped once, content-addressed, with its build context and mounted files.
    const staged = stagedEnvs();
    assert.equal(staged.length, 1);
    const root = join(sshd.home, '.ct', 'envs', staged[0]!);
    for (const f of ['compose.yml', 'agent/Dockerfile', 'store/www/status.txt', '.ct-complete']) assert.ok(existsSync(join(root, f)), f);
    // Everything went through a handful of SSH logins, not one per command.
    assert.ok(logins() <= 3, `${logins()} SSH logins`);
    const left = execFileSync('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project.working_dir=${root}`]).toString().trim();
    assert.equal(left, '', 'no containers left behind');
  });

  test('a second run reuses the staged compose folder', async () => {
    const [name] = stagedEnvs();
    const before = statSync(join(sshd.home, '.ct', 'envs', name!, '.ct-complete')).mtimeMs;
    const r = await runCt(
      ['run', 'eval', '-e', 'kv_service', '-t', 'fetch_status', '--policy', 'test', '--sandbox', spec(), '--ssh-key', sshd.clientKeyFile, '--json'],
      { env: env() },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(stagedEnvs(), [name]);
    assert.equal(statSync(join(sshd.home, '.ct', 'envs', name!, '.ct-complete')).mtimeMs, before);
  });

  test('a host that refuses the key exits 2 and says what to do', async () => {
    const other = join(dir, 'other_key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', other]);
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--sandbox', spec(), '--ssh-key', other], {
      env: env(),
    });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /did not accept any key/);
    assert.match(r.stderr, /--ssh-key/);
  });

  test('a malformed ssh:// address is a usage error', async () => {
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '--sandbox', 'ssh://host/path'], { env: env() });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /ssh:\/\/user@host\[:port\]/);
  });

  test('ct sandbox cleanup --sandbox ssh:// sweeps the remote host', async () => {
    const r = await runCt(['sandbox', 'cleanup', '--sandbox', spec(), '--ssh-key', sshd.clientKeyFile, '--json'], { env: env() });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(Object.keys(JSON.parse(r.stdout)).sort(), ['kept', 'removed']);
  });
});

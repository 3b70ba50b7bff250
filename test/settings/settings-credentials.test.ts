/**
 * Private settings over HTTP with Basic auth (git http-backend behind a local server): a token
 * from GH_TOKEN/GITHUB_TOKEN or from a repository URL reaches git through its environment and
 * never shows up in output, the lock file or the checkout's .git; the token is offered only to
 * git.token_hosts; a git call that hangs is killed after git.timeout.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { SettingRepo, ct, filesContaining, makeProject, removeTempDirs, show, tempDir } from './helpers/git-fixtures.js';
import { startGitHttpServer, type GitHttpServer } from './helpers/git-http-server.js';

const TOKEN = 'ghp_Secret0Token0For0Tests0123456789';

describe('settings credentials', () => {
  let server: GitHttpServer;
  let repoUrl: string;

  before(async () => {
    const root = tempDir('private');
    new SettingRepo(root, 'private');
    server = await startGitHttpServer(root, 'x-access-token', TOKEN);
    repoUrl = `${server.url}/private.git`;
  });

  after(async () => {
    await server?.close();
    removeTempDirs();
  });

  function assertNoToken(project: string, outputs: string[], allowed: string[] = []): void {
    for (const o of outputs) assert.ok(!o.includes(TOKEN), `the token appears in output:\n${o}`);
    const files = filesContaining(project, TOKEN).filter((f) => !allowed.includes(f));
    assert.deepEqual(files, [], 'no file holds the token');
  }

  for (const variable of ['GH_TOKEN', 'GITHUB_TOKEN']) {
    test(`a token in ${variable} reaches git and never appears in output or files`, async () => {
      const project = makeProject({ settings: { private: { repo: repoUrl } }, git: { token_hosts: [server.url] } });
      const seen = server.authorizations.length;
      const pull = await ct(project, ['settings', 'pull', 'private'], { [variable]: TOKEN });
      assert.equal(pull.code, 0, show(pull));
      assert.ok(existsSync(join(project, '.settings', 'private', 'notes_app', 'codebase', 'compose.yml')));
      assert.ok(server.authorizations.slice(seen).includes(`x-access-token:${TOKEN}`), 'the server saw the token');
      const lock = parse(readFileSync(join(project, '.settings.lock.yml'), 'utf8'));
      assert.equal(lock.private.repo, repoUrl);

      const status = await ct(project, ['settings', 'status', '--json'], { [variable]: TOKEN });
      assert.equal(status.code, 0, show(status));
      assert.equal(JSON.parse(status.stdout)[0].state, 'ok');
      assertNoToken(project, [pull.stdout, pull.stderr, status.stdout, status.stderr]);
    });
  }

  test('the token is offered only to git.token_hosts (default https://github.com)', async () => {
    const project = makeProject({ settings: { private: { repo: repoUrl } } });
    const seen = server.authorizations.length;
    const r = await ct(project, ['settings', 'pull', 'private'], { GH_TOKEN: TOKEN });
    assert.equal(r.code, 1, show(r));
    assert.match(r.stderr, /git clone failed: .*(could not read Username|Authentication failed)/);
    assert.deepEqual(server.authorizations.slice(seen), [], 'no credentials were sent to a host outside token_hosts');
    assert.ok(!existsSync(join(project, '.settings', 'private')));
    assertNoToken(project, [r.stdout, r.stderr]);
  });

  test('credentials in a configured repository URL are used, but kept out of the lock file, .git/config and messages', async () => {
    const withToken = repoUrl.replace('http://', `http://x-access-token:${TOKEN}@`);
    const project = makeProject(`settings:\n  private:\n    repo: ${withToken}\n`);
    const pull = await ct(project, ['settings', 'pull', 'private']);
    assert.equal(pull.code, 0, show(pull));
    assert.equal(parse(readFileSync(join(project, '.settings.lock.yml'), 'utf8')).private.repo, `${repoUrl}`);
    const status = await ct(project, ['settings', 'status']);
    assert.match(status.stdout, new RegExp(`private\\s+HEAD.*${repoUrl.replace(/[.]/g, '\\.')}`));
    // The config file is where the user put it; nothing ct writes holds it.
    assertNoToken(project, [pull.stdout, pull.stderr, status.stdout, status.stderr], [join(project, 'ct.config.yml')]);

    const missing = makeProject(`settings:\n  gone:\n    repo: ${withToken.replace('private.git', 'missing.git')}\n`);
    const failed = await ct(missing, ['settings', 'pull', 'gone'], { GH_TOKEN: TOKEN });
    assert.equal(failed.code, 1, show(failed));
    assertNoToken(missing, [failed.stdout, failed.stderr], [join(missing, 'ct.config.yml')]);
  });

  test('settings add refuses a URL with credentials and does not echo them', async () => {
    const project = makeProject({});
    const r = await ct(project, ['settings', 'add', 'private', repoUrl.replace('http://', `http://me:${TOKEN}@`)]);
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /http:\/\/\*\*\*@127\.0\.0\.1:\d+\/private\.git carries credentials/);
    assertNoToken(project, [r.stdout, r.stderr]);
  });

  test('a git call that hangs is killed after git.timeout', async () => {
    const project = makeProject({ settings: { slow: { repo: `${server.url}/hang/slow.git` } }, git: { timeout: 2 } });
    const started = Date.now();
    const r = await ct(project, ['settings', 'pull', 'slow']);
    assert.equal(r.code, 1, show(r));
    assert.match(r.stderr, /git clone timed out after 2s \(git\.timeout\)/);
    assert.ok(Date.now() - started < 20_000);
    assert.deepEqual(
      existsSync(join(project, '.settings')) ? filesContaining(join(project, '.settings'), 'slow') : [],
      [],
      'the temporary clone is removed',
    );
  });
});

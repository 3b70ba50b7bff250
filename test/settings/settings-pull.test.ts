/**
 * `ct settings add/pull/status/remove` against real git repositories (bare repositories on disk):
 * pulling at a tag, a branch and a commit; the lock file and --locked; envs subsets; status with
 * local edits; failed pulls leaving the previous checkout alone; unknown names.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { SettingRepo, ct, git, makeProject, removeTempDirs, show, tempDir } from './helpers/git-fixtures.js';

function lockOf(project: string): Record<string, { repo: string; ref: string; commit: string }> {
  return parse(readFileSync(join(project, '.settings.lock.yml'), 'utf8'));
}

function head(checkout: string): string {
  return git(checkout, 'rev-parse', 'HEAD');
}

describe('settings pull', () => {
  let root: string;
  let repo: SettingRepo;
  let v1: string;

  before(() => {
    root = tempDir('repos');
    repo = new SettingRepo(root);
    repo.tag('v1');
    v1 = git(repo.work, 'rev-parse', 'HEAD');
  });

  after(removeTempDirs);

  test('settings add writes an entry and keeps the rest of ct.config.yml and its comments', async () => {
    const project = makeProject('# project settings\nlog_dir: out # logs go here\n\nsandbox:\n  compose: v2\n');
    let r = await ct(project, ['settings', 'add', 'demo', repo.bare, '--ref', 'v1', '--env', 'notes_app']);
    assert.equal(r.code, 0, show(r));
    const text = readFileSync(join(project, 'ct.config.yml'), 'utf8');
    assert.match(text, /^# project settings$/m);
    assert.match(text, /^log_dir: out # logs go here$/m);
    assert.match(text, /^ {2}compose: v2$/m);
    assert.deepEqual(parse(text).settings, { demo: { repo: repo.bare, ref: 'v1', envs: ['notes_app'] } });

    r = await ct(project, ['settings', 'add', 'demo', repo.bare, '--ref', 'main']);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /replaced setting demo/);
    assert.deepEqual(parse(readFileSync(join(project, 'ct.config.yml'), 'utf8')).settings, { demo: { repo: repo.bare, ref: 'main' } });

    // ct.config.local.yml overrides the shared entry for this user only.
    r = await ct(project, ['settings', 'add', 'demo', repo.bare, '--ref', 'v1', '--local']);
    assert.equal(r.code, 0, show(r));
    r = await ct(project, ['settings', 'status', '--json']);
    assert.equal(r.code, 0, show(r));
    assert.equal(JSON.parse(r.stdout)[0].ref, 'v1');
  });

  test('pull clones the default setting at its tag and records repo, ref and commit in the lock file', async () => {
    const project = makeProject({ default_setting: 'demo', settings: { demo: { repo: repo.bare, ref: 'v1' } } });
    const r = await ct(project, ['settings', 'pull']);
    assert.equal(r.code, 0, show(r));
    const checkout = join(project, '.settings', 'demo');
    assert.ok(existsSync(join(checkout, 'notes_app', 'codebase', 'compose.yml')));
    assert.equal(head(checkout), v1);
    assert.match(r.stdout, new RegExp(`demo: v1 at ${v1.slice(0, 12)} \\(kv_service, notes_app\\)`));
    assert.deepEqual(lockOf(project), { demo: { repo: repo.bare, ref: 'v1', commit: v1 } });
    assert.deepEqual(readdirSync(join(project, '.settings')), ['demo'], 'no temporary folders are left behind');

    const list = await ct(project, ['envs', 'list', '--json']);
    assert.equal(list.code, 0, show(list));
    assert.deepEqual(
      JSON.parse(list.stdout).map((e: { setting: string; env: string }) => `${e.setting}:${e.env}`),
      ['demo:kv_service', 'demo:notes_app'],
    );
  });

  test('re-pulling at a new ref moves the checkout and the lock file to it', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare, ref: 'v1' } } });
    assert.equal((await ct(project, ['settings', 'pull', 'demo'])).code, 0);
    const v2 = repo.change('CHANGELOG.md', 'v2\n');
    repo.tag('v2');

    const r = await ct(project, ['settings', 'pull', 'demo@v2']);
    assert.equal(r.code, 0, show(r));
    const checkout = join(project, '.settings', 'demo');
    assert.equal(head(checkout), v2);
    assert.equal(readFileSync(join(checkout, 'CHANGELOG.md'), 'utf8'), 'v2\n');
    assert.deepEqual(lockOf(project).demo, { repo: repo.bare, ref: 'v2', commit: v2 });

    // Back to the configured ref: the file added in v2 is gone again.
    const back = await ct(project, ['settings', 'pull', 'demo']);
    assert.equal(back.code, 0, show(back));
    assert.equal(head(checkout), v1);
    assert.ok(!existsSync(join(checkout, 'CHANGELOG.md')));
  });

  test('a setting pinned by commit hash (full or abbreviated) checks out that commit', async () => {
    repo.change('pinned.txt', 'later\n');
    for (const ref of [v1, v1.slice(0, 10)]) {
      const project = makeProject({ settings: { demo: { repo: repo.bare, ref } } });
      const r = await ct(project, ['settings', 'pull', 'demo']);
      assert.equal(r.code, 0, show(r));
      assert.equal(head(join(project, '.settings', 'demo')), v1);
      assert.equal(lockOf(project).demo!.commit, v1);
      assert.equal(lockOf(project).demo!.ref, ref);
    }
  });

  test('--locked pulls the commit in the lock file even after the branch has moved on', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare, ref: 'main' } } });
    assert.equal((await ct(project, ['settings', 'pull', 'demo'])).code, 0);
    const first = lockOf(project).demo!.commit;
    const later = repo.change('moved.txt', 'moved on\n');
    assert.notEqual(first, later);

    // A second machine: same project files (config + lock), no checkout yet.
    const worker = makeProject({ settings: { demo: { repo: repo.bare, ref: 'main' } } });
    writeFileSync(join(worker, '.settings.lock.yml'), readFileSync(join(project, '.settings.lock.yml')));
    const locked = await ct(worker, ['settings', 'pull', '--all', '--locked']);
    assert.equal(locked.code, 0, show(locked));
    assert.equal(head(join(worker, '.settings', 'demo')), first);
    assert.equal(lockOf(worker).demo!.commit, first, '--locked leaves the lock file as it was');

    const unlocked = await ct(worker, ['settings', 'pull', 'demo']);
    assert.equal(unlocked.code, 0, show(unlocked));
    assert.equal(head(join(worker, '.settings', 'demo')), later);
    assert.equal(lockOf(worker).demo!.commit, later);

    const bad = await ct(worker, ['settings', 'pull', 'demo@v1', '--locked']);
    assert.equal(bad.code, 2, show(bad));
  });

  test('--locked refuses a setting the lock file does not name', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare } } });
    const r = await ct(project, ['settings', 'pull', 'demo', '--locked']);
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /not in \.settings\.lock\.yml/);
  });

  test('envs: keeps only the listed environments, and naming a missing one lists those that exist', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare, ref: 'v1', envs: ['notes_app'] } } });
    const r = await ct(project, ['settings', 'pull', 'demo']);
    assert.equal(r.code, 0, show(r));
    const checkout = join(project, '.settings', 'demo');
    assert.ok(existsSync(join(checkout, 'notes_app', 'codebase')));
    assert.ok(!existsSync(join(checkout, 'kv_service')));
    assert.ok(existsSync(join(checkout, 'task_sets', 'demo.jsonl')));
    // The demo task set names kv_service too; in a subset pull that is expected, not a problem.
    const v = await ct(project, ['envs', 'validate']);
    assert.equal(v.code, 0, show(v));

    const missing = await ct(project, ['settings', 'pull', 'demo', '--env', 'nope']);
    assert.equal(missing.code, 2, show(missing));
    assert.match(missing.stderr, /no environment nope; its environments: kv_service, notes_app/);
    assert.ok(existsSync(join(checkout, 'notes_app', 'codebase')), 'the previous checkout is intact');
  });

  test('status shows ref, locked and checked-out commit and local edits; pull and remove refuse them without --force', async () => {
    const project = makeProject('# shared config\nsettings:\n  demo:\n    repo: ' + repo.bare + '\n    ref: v1\n');
    assert.equal((await ct(project, ['settings', 'pull', 'demo'])).code, 0);
    const checkout = join(project, '.settings', 'demo');
    writeFileSync(join(checkout, 'notes_app', 'docs', 'description.md'), 'edited\n');
    writeFileSync(join(checkout, 'scratch.txt'), 'new\n');

    const json = await ct(project, ['settings', 'status', '--json']);
    assert.equal(json.code, 0, show(json));
    const [s] = JSON.parse(json.stdout);
    assert.equal(s.name, 'demo');
    assert.equal(s.ref, 'v1');
    assert.equal(s.commit, v1);
    assert.equal(s.locked.commit, v1);
    assert.equal(s.state, 'modified');
    assert.deepEqual(s.changes, [' M notes_app/docs/description.md', '?? scratch.txt']);

    const text = await ct(project, ['settings', 'status']);
    assert.equal(text.code, 0, show(text));
    assert.match(text.stdout, /demo\s+v1\s+\w{12}\s+\w{12}\s+modified \(2 changed files\)/);
    assert.match(text.stdout, /notes_app\/docs\/description\.md/);

    const pull = await ct(project, ['settings', 'pull', 'demo']);
    assert.equal(pull.code, 2, show(pull));
    assert.match(pull.stderr, /has local changes \(2 changed files\)/);
    assert.equal(readFileSync(join(checkout, 'scratch.txt'), 'utf8'), 'new\n');

    const remove = await ct(project, ['settings', 'remove', 'demo']);
    assert.equal(remove.code, 2, show(remove));
    assert.match(remove.stderr, /local changes/);
    assert.ok(existsSync(checkout));

    const forced = await ct(project, ['settings', 'remove', 'demo', '--force']);
    assert.equal(forced.code, 0, show(forced));
    assert.ok(!existsSync(checkout));
    const config = readFileSync(join(project, 'ct.config.yml'), 'utf8');
    assert.match(config, /^# shared config$/m);
    assert.equal(parse(config).settings.demo, undefined);
    assert.deepEqual(lockOf(project), {});
  });

  test('status names the default setting only when it is registered; an unregistered default_setting is a note, not a row', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare, ref: 'v1' } } });
    const r = await ct(project, ['settings', 'status']);
    assert.equal(r.code, 0, show(r));
    const lines = r.stdout.split('\n');
    assert.deepEqual(lines.filter((l) => /^\S+\s+(v1|HEAD|-)\s/.test(l)).map((l) => l.split(/\s+/)[0]), ['demo']);
    assert.doesNotMatch(r.stdout, /default setting:/);
    assert.ok(
      r.stdout.includes(
        'note: default_setting is "linuxarena-private", which is not a registered setting (not in ct.config.yml or ct.config.local.yml); ' +
          '`ct settings pull` without a NAME and `ct run eval --fleet -e ENV` without a SETTING: prefix need it. ' +
          'Register it with `ct settings add linuxarena-private REPO`, or set default_setting to one of: demo.',
      ),
      show(r),
    );

    const registered = makeProject({ default_setting: 'demo', settings: { demo: { repo: repo.bare, ref: 'v1' } } });
    const ok = await ct(registered, ['settings', 'status']);
    assert.equal(ok.code, 0, show(ok));
    assert.match(ok.stdout, /^default setting: demo$/m);
    assert.doesNotMatch(ok.stdout, /note:/);
  });

  test('a pull of a ref that does not exist fails, naming the refs there are, and leaves the old checkout intact', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare, ref: 'v1' } } });
    assert.equal((await ct(project, ['settings', 'pull', 'demo'])).code, 0);
    const lockBefore = readFileSync(join(project, '.settings.lock.yml'), 'utf8');

    const r = await ct(project, ['settings', 'pull', 'demo@no-such-tag']);
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /ref "no-such-tag" not found in .*demo\.git \(branches and tags: main, v1/);
    const checkout = join(project, '.settings', 'demo');
    assert.equal(head(checkout), v1);
    assert.ok(existsSync(join(checkout, 'kv_service', 'codebase')));
    assert.deepEqual(readdirSync(join(project, '.settings')), ['demo'], 'the temporary clone is removed');
    assert.equal(readFileSync(join(project, '.settings.lock.yml'), 'utf8'), lockBefore);
  });

  test('a pull from a repository that has vanished fails and leaves the old checkout intact', async () => {
    const gone = new SettingRepo(tempDir('vanishing'));
    const project = makeProject({ settings: { demo: { repo: gone.bare } } });
    assert.equal((await ct(project, ['settings', 'pull', 'demo'])).code, 0);
    const pulled = head(join(project, '.settings', 'demo'));
    renameSync(gone.bare, `${gone.bare}.moved`);

    const r = await ct(project, ['settings', 'pull', 'demo']);
    assert.equal(r.code, 1, show(r));
    assert.match(r.stderr, /git clone failed: .*does not exist/);
    assert.equal(head(join(project, '.settings', 'demo')), pulled);
    assert.ok(existsSync(join(project, '.settings', 'demo', 'notes_app', 'codebase', 'compose.yml')));
    assert.deepEqual(readdirSync(join(project, '.settings')), ['demo']);
  });

  test('an unknown setting name lists the known ones and exits 2', async () => {
    const project = makeProject({ settings: { demo: { repo: repo.bare }, other: { repo: repo.bare } } });
    for (const args of [['settings', 'pull', 'nope'], ['settings', 'remove', 'nope'], ['settings', 'pull']]) {
      const r = await ct(project, args);
      assert.equal(r.code, 2, show(r));
      assert.match(r.stderr, /unknown setting "(nope|linuxarena-private)".*; known settings: demo, other/);
    }
  });
});

/**
 * A worker's settings cache (`fetchPinnedSettings`) against real git repositories: the pinned
 * commit and not the branch head, reuse of a cached checkout, two fetches of one pin at once
 * (two workers on one machine), local-folder pins, and a commit the repository lacks.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { fetchPinnedSettings } from '../../src/fleet/settings-fetch.js';
import { GitRunner } from '../../src/tasks/git-runner.js';
import { SettingRepo, git, isolatedEnv, removeTempDirs, tempDir } from '../settings/helpers/git-fixtures.js';

const SCORER = 'notes_app/main_tasks/create_greeting/scorer.sh';

describe('fetchPinnedSettings', () => {
  let repo: SettingRepo;
  let commitA: string;
  let runner: GitRunner;

  before(() => {
    repo = new SettingRepo(tempDir('fetch-repo'), 'demo');
    commitA = git(repo.work, 'rev-parse', 'HEAD');
    repo.change(SCORER, 'echo "INCORRECT: B"\n');
    runner = new GitRunner({ timeoutSeconds: 30, env: isolatedEnv() });
  });
  after(() => removeTempDirs());

  const options = (cacheDir: string, lines: string[] = []) => ({ cacheDir, git: runner, cwd: cacheDir, log: (l: string) => lines.push(l) });

  test('fetches the pinned commit, not the branch head, and reuses the checkout afterwards', async () => {
    const cache = tempDir('fetch-cache');
    const first: string[] = [];
    const dirs = await fetchPinnedSettings([{ name: 'demo', repo: repo.bare, commit: commitA }], options(cache, first));
    const dir = dirs.get('demo')!;
    assert.equal(dir, join(cache, 'demo', commitA));
    assert.doesNotMatch(readFileSync(join(dir, SCORER), 'utf8'), /INCORRECT: B/);
    assert.equal(git(dir, 'rev-parse', 'HEAD'), commitA);
    assert.ok(first.some((l) => l.startsWith('fetching demo from')));
    const second: string[] = [];
    assert.equal((await fetchPinnedSettings([{ name: 'demo', repo: repo.bare, commit: commitA }], options(cache, second))).get('demo'), dir);
    assert.ok(second.some((l) => /already here/.test(l)) && !second.some((l) => l.startsWith('fetching')), second.join('\n'));
  });

  test('two fetches of the same pin at once both get one complete checkout, and no staging folder is left', async () => {
    const cache = tempDir('fetch-race');
    const pin = [{ name: 'demo', repo: repo.bare, commit: commitA }];
    const [a, b] = await Promise.all([fetchPinnedSettings(pin, options(cache)), fetchPinnedSettings(pin, options(cache))]);
    assert.equal(a.get('demo'), b.get('demo'));
    assert.ok(existsSync(join(a.get('demo')!, 'notes_app', 'codebase', 'compose.yml')));
    assert.deepEqual(readdirSync(join(cache, 'demo')), [commitA]);
  });

  test('a local-folder pin is read in place; one this machine lacks is a clear error', async () => {
    const cache = tempDir('fetch-local');
    const dirs = await fetchPinnedSettings([{ name: 'mine', repo: repo.work, commit: commitA, local_folder: true }], options(cache));
    assert.equal(dirs.get('mine'), repo.work);
    await assert.rejects(
      fetchPinnedSettings([{ name: 'mine', repo: join(cache, 'elsewhere'), commit: commitA, local_folder: true }], options(cache)),
      (e: unknown) => e instanceof ConfigError && /setting mine is a folder on the controller's machine .*ct settings add mine/.test(e.message),
    );
  });

  test('a commit the repository does not have: an error naming setting, commit and repository; the cache stays empty', async () => {
    const cache = tempDir('fetch-missing');
    const missing = '0123456789abcdef0123456789abcdef01234567';
    await assert.rejects(
      fetchPinnedSettings([{ name: 'demo', repo: repo.bare, commit: missing }], options(cache)),
      (e: unknown) => e instanceof ConfigError && e.message.startsWith(`cannot fetch setting demo at commit ${missing.slice(0, 12)} from ${repo.bare}`),
    );
    assert.deepEqual(readdirSync(join(cache, 'demo')), []);
  });
});

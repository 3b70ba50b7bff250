/**
 * A worker's settings cache (`fetchPinnedSettings`) against real git repositories: the pinned
 * commit and not the branch head, reuse of a cached checkout, two fetches of one pin at once
 * (two workers on one machine), local-folder pins, a commit the repository lacks, and pruning
 * of checkouts nobody used for a week.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
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

  test('checkouts unused for a week are pruned, except the three most recent and those in use', async () => {
    const cache = tempDir('fetch-prune');
    const old = new Date(Date.now() - 30 * 86_400_000);
    // Five earlier checkouts (fake folders), all a month old, and one of another setting.
    const earlier = ['c1', 'c2', 'c3', 'c4', 'c5'].map((c, i) => {
      const dir = join(cache, 'demo', c.repeat(20));
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'marker'), c);
      const t = new Date(old.getTime() + i * 1000);
      utimesSync(dir, t, t);
      return dir;
    });
    const other = join(cache, 'other', 'f'.repeat(40));
    mkdirSync(other, { recursive: true });
    utimesSync(other, old, old);
    const lines: string[] = [];
    const dirs = await fetchPinnedSettings([{ name: 'demo', repo: repo.bare, commit: commitA }], options(cache, lines));
    const left = readdirSync(join(cache, 'demo')).sort();
    // Kept: the checkout in use (now the most recent) and the two most recent of the old ones.
    assert.deepEqual(left, [commitA, 'c4'.repeat(20), 'c5'.repeat(20)].sort(), lines.join('\n'));
    assert.ok(existsSync(join(dirs.get('demo')!, 'notes_app')));
    assert.ok(!existsSync(earlier[0]!));
    // A lone checkout of another setting is among its own three most recent: kept.
    assert.ok(existsSync(other));
    assert.equal(lines.filter((l) => /settings cache: removed/.test(l)).length, 3, lines.join('\n'));
  });
});

/**
 * Which settings fleet workers pull: `-e [setting:]env` parsing (bare uses the default setting;
 * mixing forms is refused with the reason), and the repository and exact commit the manifest
 * records for each (the lock file's, else the pulled checkout's HEAD), without credentials.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { configSchema } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { parseFleetEnvs, pinSettings } from '../../src/fleet/settings-pin.js';
import { GitRunner } from '../../src/tasks/git-runner.js';
import { SettingsLock } from '../../src/tasks/settings-lock.js';
import { SettingsRegistry } from '../../src/tasks/settings-registry.js';
import { SettingRepo, git, isolatedEnv, removeTempDirs, tempDir } from '../settings/helpers/git-fixtures.js';

describe('-e for the fleet', () => {
  test('bare environments come from the default setting', () => {
    assert.deepEqual(parseFleetEnvs(['load_balancer', 'web_scraping'], 'linuxarena-private'), {
      envs: ['load_balancer', 'web_scraping'],
      settings: ['linuxarena-private'],
      settingOf: { load_balancer: 'linuxarena-private', web_scraping: 'linuxarena-private' },
    });
  });

  test('setting:env names each setting once, in order of first mention', () => {
    assert.deepEqual(parseFleetEnvs(['basharena:basharena', 'linuxarena-private:load_balancer', 'basharena:other'], 'linuxarena-private'), {
      envs: ['basharena', 'load_balancer', 'other'],
      settings: ['basharena', 'linuxarena-private'],
      settingOf: { basharena: 'basharena', load_balancer: 'linuxarena-private', other: 'basharena' },
    });
  });

  test('mixing bare and prefixed forms is refused with the reason and what to do', () => {
    assert.throws(
      () => parseFleetEnvs(['basharena:basharena', 'web_scraping'], 'linuxarena-private'),
      (e: unknown) =>
        e instanceof ConfigError &&
        /-e basharena:basharena and -e web_scraping mix/.test(e.message) &&
        /ambiguous/.test(e.message) &&
        /also pull linuxarena-private for web_scraping/.test(e.message) &&
        /Either prefix every -e \(setting:env\) or leave them all bare/.test(e.message),
    );
  });

  test('malformed values are refused', () => {
    for (const bad of ['a:b:c', ':env', 'setting:', '../x', 'ok:-rf']) {
      assert.throws(() => parseFleetEnvs([bad], 'linuxarena-private'), ConfigError, bad);
    }
    assert.throws(() => parseFleetEnvs(['s1:env', 's2:env'], 'd'), (e: unknown) => e instanceof ConfigError && /two settings \(s1 and s2\)/.test(e.message));
  });
});

describe('settings pinned for workers', () => {
  after(removeTempDirs);

  const runner = new GitRunner({ timeoutSeconds: 60, env: isolatedEnv() });

  /** A project whose registry names `demo` (a local bare repo, relative path) and `private` (an https URL with a token). */
  function project() {
    const root = tempDir('pin');
    const demo = new SettingRepo(root);
    const config = configSchema.parse({
      settings: { demo: { repo: './demo.git' }, private: { repo: 'https://user:s3cret-token@example.invalid/org/private.git', envs: ['web'] } },
    });
    return { root, demo, config, registry: new SettingsRegistry(config, root) };
  }

  test('a locked setting is pinned at the lock file\'s commit, with its repository and no credentials', async () => {
    const { root, registry } = project();
    const commit = 'c'.repeat(40);
    writeFileSync(join(root, '.settings.lock.yml'), `private:\n  repo: https://example.invalid/org/private.git\n  ref: main\n  commit: ${commit}\n`);
    const pins = await pinSettings(['private'], { registry, lock: SettingsLock.read(root), settingsDir: '.settings', git: runner });
    assert.deepEqual(pins, [{ name: 'private', repo: 'https://example.invalid/org/private.git', commit, envs: ['web'] }]);
    assert.ok(!JSON.stringify(pins).includes('s3cret'));
  });

  test('an unlocked setting is pinned at its checkout\'s HEAD; a local repository path is made absolute', async () => {
    const { root, demo, registry } = project();
    git(root, 'clone', '--quiet', demo.bare, join(root, '.settings', 'demo'));
    const head = demo.change('README.md', 'moved on\n');
    git(join(root, '.settings', 'demo'), 'pull', '--quiet');
    const pins = await pinSettings(['demo'], { registry, lock: SettingsLock.read(root), settingsDir: '.settings', git: runner });
    assert.deepEqual(pins, [{ name: 'demo', repo: join(root, 'demo.git'), commit: head }]);
  });

  test('a setting neither locked nor pulled, or unknown, is a usage error saying what to run', async () => {
    const { root, registry } = project();
    const o = { registry, lock: SettingsLock.read(root), settingsDir: '.settings', git: runner };
    await assert.rejects(pinSettings(['demo'], o), (e: unknown) => e instanceof ConfigError && /ct settings pull demo/.test(e.message));
    await assert.rejects(pinSettings(['nope'], o), (e: unknown) => e instanceof ConfigError && /unknown setting "nope"/.test(e.message));
  });

  test('a setting that is only a folder (the examples\' set-up) is a usage error naming what registers it', async () => {
    const { root, registry } = project();
    mkdirSync(join(root, 'examples', 'settings', 'local_only'), { recursive: true });
    const o = { registry, lock: SettingsLock.read(root), settingsDir: 'examples/settings', git: runner };
    await assert.rejects(pinSettings(['local_only'], o), (e: unknown) => {
      assert.ok(e instanceof ConfigError);
      assert.match(e.message, /external and EC2 workers pull every setting of the run from git.*setting local_only is only a folder here \(.*examples\/settings\/local_only\), not registered as a git repository/);
      assert.match(e.message, /`ct settings add local_only <git URL or path of its repository>`, then `ct settings pull local_only`/);
      return true;
    });
  });
});

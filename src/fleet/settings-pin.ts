/**
 * Which settings fleet workers pull, and at which commits. Workers have no `.settings/` and no
 * user config: the controller parses `-e [setting:]env`, resolves each setting's repository and
 * the exact commit it runs locally (the lock file's, else the checkout's HEAD), and writes them
 * into the manifest, so every worker runs the same task content.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SETTING_NAME } from '../config/config.js';
import { ConfigError } from '../errors.js';
import type { GitRunner } from '../tasks/git-runner.js';
import type { SettingsLock } from '../tasks/settings-lock.js';
import { locateRepo, type SettingsRegistry } from '../tasks/settings-registry.js';
import type { ManifestSetting } from './protocol.js';

/** `-e` values of a fleet run, split into environments and the settings they come from. */
export interface FleetEnvs {
  /** Environment names, in the order given (what the local selection uses). */
  envs: string[];
  /** Settings to pull, each once, in order of first mention. */
  settings: string[];
  /** The setting of each environment. */
  settingOf: Record<string, string>;
}

/**
 * Parses `-e` values for the fleet: all `setting:env`, or all bare `env` (each from
 * `defaultSetting`). Mixing both forms is refused, because it is ambiguous.
 */
export function parseFleetEnvs(values: readonly string[], defaultSetting: string): FleetEnvs {
  const prefixed = values.filter((v) => v.includes(':'));
  const bare = values.filter((v) => !v.includes(':'));
  if (prefixed.length > 0 && bare.length > 0) {
    throw new ConfigError(
      `-e ${prefixed[0]} and -e ${bare[0]} mix the setting:env and bare forms. That is ambiguous: it could mean "also pull ${defaultSetting} for ${bare[0]}", ` +
        `or a forgotten prefix. Either prefix every -e (setting:env) or leave them all bare (bare environments come from ${defaultSetting}).`,
    );
  }
  const out: FleetEnvs = { envs: [], settings: [], settingOf: {} };
  for (const v of values) {
    const [setting, env, extra] = v.includes(':') ? v.split(':') : [defaultSetting, v];
    if (extra !== undefined || !setting || !env) throw new ConfigError(`-e ${v}: expected ENV or SETTING:ENV`);
    if (!SETTING_NAME.test(setting)) throw new ConfigError(`-e ${v}: "${setting}" is not a valid setting name (letters, digits, . _ -)`);
    if (!SETTING_NAME.test(env)) throw new ConfigError(`-e ${v}: "${env}" is not a valid environment name (letters, digits, . _ -)`);
    const known = out.settingOf[env];
    if (known && known !== setting) throw new ConfigError(`-e: environment ${env} is named from two settings (${known} and ${setting}); pick one`);
    if (!known) out.envs.push(env);
    out.settingOf[env] = setting;
    if (!out.settings.includes(setting)) out.settings.push(setting);
  }
  return out;
}

export interface PinOptions {
  registry: SettingsRegistry;
  lock: SettingsLock;
  /** Config `settings_dir`, relative to the project root unless absolute. */
  settingsDir: string;
  git: GitRunner;
}

/**
 * The repository and commit of each setting, as the controller resolved them: the lock file's
 * entry when there is one, else the local checkout's HEAD. A setting neither locked nor pulled
 * is a ConfigError saying what to run. Credentials never reach the manifest.
 */
export async function pinSettings(names: readonly string[], o: PinOptions): Promise<ManifestSetting[]> {
  const root = o.registry.projectRoot;
  const out: ManifestSetting[] = [];
  for (const name of names) {
    const locked = o.lock.get(name);
    const entry = o.registry.has(name) ? o.registry.get(name) : undefined;
    if (!locked && !entry) throw notRegistered(name, o);
    const repo = locateRepo(entry?.repo ?? locked!.repo, root).display;
    let commit = locked?.commit;
    if (!commit) {
      const checkout = join(resolve(root, o.settingsDir), name);
      if (!existsSync(join(checkout, '.git'))) {
        throw new ConfigError(
          `${PULLED_FROM_GIT}; setting ${name} is neither in the lock file nor pulled, so there is no commit to pin. ` +
            `Run \`ct settings pull ${name}\` first, so workers get the same commit`,
        );
      }
      commit = (await o.git.run(['rev-parse', '--verify', 'HEAD^{commit}'], { cwd: checkout })).stdout.trim();
    }
    // A local path only resolves on this machine; workers elsewhere need a URL.
    const pinned: ManifestSetting = { name, repo: isLocalPath(repo) ? resolve(root, repo) : repo, commit };
    if (entry?.envs) pinned.envs = entry.envs;
    out.push(pinned);
  }
  return out;
}

/** Why pins need git, said first in each refusal (local: workers never get these: they read folders in place). */
const PULLED_FROM_GIT = 'external and EC2 workers pull every setting of the run from git, at the commit this machine pins';

/**
 * A setting neither registered nor locked. When it is a folder here (a copied or example
 * setting), say so: the name is right, it only needs a repository behind it.
 */
function notRegistered(name: string, o: PinOptions): ConfigError {
  const folder = join(resolve(o.registry.projectRoot, o.settingsDir), name);
  if (!existsSync(folder)) {
    return new ConfigError(`${o.registry.unknown(name, o.lock.names()).message}. Note: ${PULLED_FROM_GIT}, so it must be registered (\`ct settings add ${name} REPO\`)`);
  }
  return new ConfigError(
    `${PULLED_FROM_GIT}, and setting ${name} is only a folder here (${folder}), not registered as a git repository. ` +
      `Register and pull it: \`ct settings add ${name} <git URL or path of its repository>\`, then \`ct settings pull ${name}\`; ` +
      'or run with --workers local:N, whose workers read the folder in place',
  );
}

function isLocalPath(repo: string): boolean {
  return !/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(repo) && !/^[^/]+:/.test(repo);
}

import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Command } from 'commander';
import { loadConfig, type Config } from '../config/config.js';
import { ConfigError, CtError, GitError, errorMessage } from '../errors.js';
import type { GitRunner } from '../tasks/git-runner.js';
import { settingsGitRunner } from '../tasks/settings-git.js';
import { LOCK_FILE, SettingsLock } from '../tasks/settings-lock.js';
import { describeChanges, pullSetting, type PullRequest, type PullResult } from '../tasks/settings-pull.js';
import {
  CONFIG_FILE,
  LOCAL_CONFIG_FILE,
  SettingsRegistry,
  checkName,
  deleteSettingEntry,
  locateRepo,
  writeSettingEntry,
} from '../tasks/settings-registry.js';
import { localChanges, settingsStatus, type SettingStatus } from '../tasks/settings-status.js';
import { collect } from './parse.js';

interface Context {
  root: string;
  config: Config;
  git: GitRunner;
  registry: SettingsRegistry;
}

/** The project root is the working folder: ct.config.yml and the lock file live there. */
function context(): Context {
  const root = process.cwd();
  const config = loadConfig({ cwd: root, env: process.env });
  return { root, config, git: settingsGitRunner(config, process.env), registry: new SettingsRegistry(config, root) };
}

export function registerSettingsCommands(program: Command): void {
  const settings = program
    .command('settings')
    .description(`Settings: git repositories of environments, named in ${CONFIG_FILE} and pulled into settings_dir (default .settings/).`);

  settings
    .command('add')
    .description(`Add (or replace) a named setting in ${CONFIG_FILE}, keeping the rest of the file and its comments.`)
    .argument('<name>', 'the setting name; also its folder under settings_dir')
    .argument('<repo>', 'git URL or local path (no credentials: private repositories use your git credentials or GH_TOKEN)')
    .option('--ref <ref>', 'branch, tag or commit (default: the default branch)')
    .option('--env <env>', 'check out only this environment (repeatable; default: all)', collect, [])
    .option('--local', `write to ${LOCAL_CONFIG_FILE} (git-ignored, yours only) instead`)
    .addHelpText('after', '\nExample:\n  ct settings add basharena https://github.com/org/basharena.git --ref v1.2 --env basharena\n')
    .action((name: string, repo: string, flags: { ref?: string; env: string[]; local?: boolean }) => {
      const entry = { repo, ...(flags.ref ? { ref: flags.ref } : {}), ...(flags.env.length ? { envs: flags.env } : {}) };
      const { file, replaced } = writeSettingEntry(process.cwd(), name, entry, { local: flags.local });
      process.stdout.write(`${replaced ? 'replaced' : 'added'} setting ${name} in ${relative(process.cwd(), file)}; fetch it with \`ct settings pull ${name}\`\n`);
    });

  settings
    .command('pull')
    .description(`Clone or update settings into settings_dir at their pinned ref, and record the commits in ${LOCK_FILE}.`)
    .argument('[name[@ref]]', 'the setting, optionally at another ref (default: default_setting)')
    .option('--env <env>', 'check out only this environment (repeatable; default: the setting\'s envs, else all)', collect, [])
    .option('--all', 'pull every setting')
    .option('--locked', `check out exactly the commits in ${LOCK_FILE}`)
    .option('--force', 'replace a checkout that has local changes')
    .option('--json', 'print what was pulled as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  ct settings pull                 # the default setting\n  ct settings pull demo@v2\n  ct settings pull --all --locked  # what a fleet worker runs\n',
    )
    .action(async (target: string | undefined, flags: { env: string[]; all?: boolean; locked?: boolean; force?: boolean; json?: boolean }) => {
      await pullCommand(target, flags);
    });

  settings
    .command('status')
    .description("Each setting's ref, locked and checked-out commit, and local changes.")
    .option('--json', 'print the status as JSON')
    .addHelpText('after', '\nExample:\n  ct settings status --json\n')
    .action(async (flags: { json?: boolean }) => {
      const ctx = context();
      const rows = await settingsStatus(ctx.git, ctx.registry, SettingsLock.read(ctx.root), ctx.config.settings_dir);
      if (flags.json) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      else process.stdout.write(formatStatus(rows, ctx));
    });

  settings
    .command('remove')
    .description(`Remove a setting: its ${CONFIG_FILE} entry, lock entry and checkout. Refuses when the checkout has local changes.`)
    .argument('<name>', 'the setting')
    .option('--force', 'remove even with local changes')
    .addHelpText('after', '\nExample:\n  ct settings remove basharena\n')
    .action(async (name: string, flags: { force?: boolean }) => {
      await removeCommand(name, Boolean(flags.force));
    });
}

async function pullCommand(
  target: string | undefined,
  flags: { env: string[]; all?: boolean; locked?: boolean; force?: boolean; json?: boolean },
): Promise<void> {
  const ctx = context();
  const lock = SettingsLock.read(ctx.root);
  if (flags.all && target) throw new ConfigError('--all pulls every setting; give no NAME with it');
  let jobs: Array<{ name: string; ref?: string }>;
  if (flags.all) {
    const names = flags.locked ? [...new Set([...ctx.registry.names(), ...lock.names()])].sort() : ctx.registry.names();
    if (names.length === 0) throw new ConfigError(`no settings to pull; add one with \`ct settings add NAME REPO\``);
    jobs = names.map((name) => ({ name }));
  } else jobs = [ctx.registry.parseTarget(target)];
  if (flags.locked && jobs.some((j) => j.ref !== undefined)) {
    throw new ConfigError(`--locked checks out the commit in ${LOCK_FILE}; drop the @REF, or drop --locked to pull that ref`);
  }
  const requests = jobs.map((j) => pullRequest(ctx, lock, j, flags));

  const results: PullResult[] = [];
  const failures: Array<[string, unknown]> = [];
  for (const req of requests) {
    try {
      const r = await pullSetting(ctx.git, ctx.config.settings_dir, req, (m) => process.stderr.write(`${m}\n`));
      results.push(r);
      if (!flags.locked) {
        // Re-read right before writing, so a pull of another setting meanwhile is not lost.
        const fresh = SettingsLock.read(ctx.root);
        fresh.set(r.name, { repo: r.repo, ref: r.ref, commit: r.commit });
        fresh.write();
      }
      if (!flags.json) {
        process.stdout.write(`${r.name}: ${r.ref} at ${r.commit.slice(0, 12)} (${r.envs.join(', ') || 'no environments'}) in ${relative(ctx.root, r.dir) || r.dir}\n`);
      }
    } catch (e) {
      failures.push([req.name, e]);
      if (requests.length > 1) process.stderr.write(`${req.name}: ${ctx.git.redact(errorMessage(e))}\n`);
    }
  }
  // With a failure, the JSON on stdout is the error object main prints (one JSON document).
  if (flags.json && failures.length === 0) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  else if (results.length && !flags.locked) process.stdout.write(`recorded in ${LOCK_FILE}\n`);
  if (failures.length === 1 && requests.length === 1) throw failures[0]![1];
  if (failures.length) {
    const msg = `${failures.length} of ${requests.length} settings failed to pull: ${failures.map(([n, e]) => `${n}: ${ctx.git.redact(errorMessage(e))}`).join('; ')}`;
    const transport = failures.map(([, e]) => e).filter((e): e is GitError => e instanceof GitError);
    if (transport.length) throw new GitError(msg, transport.some((e) => e.retryable));
    if (failures.every(([, e]) => e instanceof ConfigError)) throw new ConfigError(msg);
    throw failures.map(([, e]) => e).find((e) => !(e instanceof CtError)) ?? new ConfigError(msg);
  }
}

function pullRequest(ctx: Context, lock: SettingsLock, job: { name: string; ref?: string }, flags: { env: string[]; locked?: boolean; force?: boolean }): PullRequest {
  const envs = flags.env.length ? flags.env : undefined;
  if (flags.locked) {
    const entry = lock.get(job.name);
    if (!entry) {
      if (!ctx.registry.has(job.name)) throw ctx.registry.unknown(job.name, lock.names());
      throw new ConfigError(`setting ${job.name} is not in ${LOCK_FILE}; pull it once without --locked to record its commit`);
    }
    const spec = ctx.registry.has(job.name) ? ctx.registry.get(job.name) : undefined;
    const repo = locateRepo(spec?.repo ?? entry.repo, ctx.root);
    if (spec && repo.display !== entry.repo) {
      throw new ConfigError(
        `${LOCK_FILE} has setting ${job.name} from ${ctx.git.redact(entry.repo)} but ${CONFIG_FILE} says ${ctx.git.redact(repo.display)}; pull it without --locked to update the lock`,
      );
    }
    return { name: job.name, repo, ref: entry.ref === 'HEAD' ? undefined : entry.ref, commit: entry.commit, envs: envs ?? spec?.envs, force: flags.force };
  }
  const spec = ctx.registry.get(job.name);
  return { name: job.name, repo: locateRepo(spec.repo, ctx.root), ref: job.ref ?? spec.ref, envs: envs ?? spec.envs, force: flags.force };
}

async function removeCommand(name: string, force: boolean): Promise<void> {
  const ctx = context();
  checkName(name);
  const lock = SettingsLock.read(ctx.root);
  const dir = join(ctx.config.settings_dir, name);
  if (!ctx.registry.has(name) && !lock.get(name) && !existsSync(dir)) throw ctx.registry.unknown(name, lock.names());
  if (existsSync(dir) && !force) {
    if (!existsSync(join(dir, '.git'))) throw new ConfigError(`${dir} is not a git checkout (copied by hand?); pass --force to remove it anyway`);
    const changes = await localChanges(ctx.git, dir);
    if (changes.length) {
      throw new ConfigError(
        `${dir} has local changes (${describeChanges(changes)}): ${changes.slice(0, 10).join('; ')}${changes.length > 10 ? '; ...' : ''}; pass --force to remove it anyway`,
      );
    }
  }
  const removed: string[] = deleteSettingEntry(ctx.root, name).map((f) => `entry in ${relative(ctx.root, f)}`);
  if (lock.delete(name)) {
    lock.write();
    removed.push(`entry in ${LOCK_FILE}`);
  }
  if (existsSync(dir)) {
    // Renamed first so an interrupted removal never leaves a half-deleted setting in place.
    const doomed = join(ctx.config.settings_dir, `.${name}.old-${process.pid}-rm`);
    await rename(dir, doomed);
    await rm(doomed, { recursive: true, force: true });
    removed.push(`checkout ${relative(ctx.root, dir) || dir}`);
  }
  process.stdout.write(`removed setting ${name}: ${removed.join(', ')}\n`);
}

function formatStatus(rows: SettingStatus[], ctx: Context): string {
  if (rows.length === 0) return `no settings; add one with \`ct settings add NAME REPO\` (settings folder: ${ctx.config.settings_dir})\n`;
  const table = rows.map((r) => [
    r.name + (r.registered ? '' : ' *'),
    r.ref ?? '-',
    r.locked ? r.locked.commit.slice(0, 12) : '-',
    r.commit ? r.commit.slice(0, 12) : '-',
    r.state + (r.changes.length ? ` (${describeChanges(r.changes)})` : ''),
    r.repo ?? '-',
  ]);
  const head = ['setting', 'ref', 'locked', 'checked out', 'state', 'repo'];
  const widths = head.map((h, i) => Math.max(h.length, ...table.map((t) => t[i]!.length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  const out = [fmt(head), ...table.map(fmt)];
  for (const r of rows.filter((x) => x.changes.length)) {
    out.push('', `${r.name}: local changes`, ...r.changes.slice(0, 20).map((c) => `  ${c}`));
    if (r.changes.length > 20) out.push(`  ... ${r.changes.length - 20} more`);
  }
  if (rows.some((r) => !r.registered)) out.push('', `* not in ${CONFIG_FILE} or ${LOCAL_CONFIG_FILE}`);
  out.push('', defaultSettingLine(ctx.registry));
  return `${out.join('\n')}\n`;
}

/** The default setting when it is registered; otherwise a note that it is not, and what that breaks. */
function defaultSettingLine(registry: SettingsRegistry): string {
  const name = registry.defaultSetting;
  if (registry.has(name)) return `default setting: ${name}`;
  const names = registry.names();
  return (
    `note: default_setting is "${name}", which is not a registered setting (not in ${CONFIG_FILE} or ${LOCAL_CONFIG_FILE}); ` +
    `\`ct settings pull\` without a NAME and \`ct run eval --fleet -e ENV\` without a SETTING: prefix need it. ` +
    `Register it with \`ct settings add ${name} REPO\`${names.length ? `, or set default_setting to one of: ${names.join(', ')}` : ''}.`
  );
}

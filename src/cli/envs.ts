import { join } from 'node:path';
import type { Command } from 'commander';
import { loadConfig } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { settingsTrust } from '../tasks/compose-trust.js';
import { SettingsCatalog, subdirs } from '../tasks/environment-loader.js';
import { validateEnvironments, type ValidationReport } from '../tasks/env-validate.js';

export function registerEnvsCommands(program: Command): void {
  const envs = program.command('envs').description('Environments of the settings in settings_dir (default .settings/).');

  envs
    .command('list')
    .description('List environments with their main and side tasks (without checking them; see `ct envs validate`).')
    .option('--json', 'print the list as JSON')
    .addHelpText('after', '\nExample:\n  ct envs list --json\n')
    .action((flags: { json?: boolean }) => {
      const config = loadConfig({ cwd: process.cwd(), env: process.env });
      const catalog = new SettingsCatalog(config.settings_dir, settingsTrust(config));
      const rows = catalog.listEnvironments().map(([setting, env]) => {
        const dir = join(catalog.root, setting, env);
        return { setting, env, dir, mainTasks: subdirs(join(dir, 'main_tasks')), sideTasks: subdirs(join(dir, 'side_tasks')) };
      });
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
        return;
      }
      if (rows.length === 0) {
        process.stdout.write(`no environments in ${catalog.root}; pull a setting with \`ct settings pull NAME\`\n`);
        return;
      }
      const table = rows.map((r) => [`${r.setting}:${r.env}`, String(r.mainTasks.length), String(r.sideTasks.length)]);
      const head = ['environment', 'main tasks', 'side tasks'];
      const widths = head.map((h, i) => Math.max(h.length, ...table.map((t) => t[i]!.length)));
      const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
      process.stdout.write(`${[fmt(head), ...table.map(fmt)].join('\n')}\n`);
    });

  envs
    .command('validate')
    .description('Check environments and task sets, naming every problem; exits 2 when there is any.')
    .argument('[env]', 'only this environment (`env` or `setting:env`); default: all')
    .option('--json', 'print the report as JSON')
    .addHelpText('after', '\nExamples:\n  ct envs validate\n  ct envs validate demo:notes_app\n')
    .action((env: string | undefined, flags: { json?: boolean }) => {
      const config = loadConfig({ cwd: process.cwd(), env: process.env });
      const catalog = new SettingsCatalog(config.settings_dir, settingsTrust(config));
      // Settings pulled with an envs: subset lack some environments on purpose.
      const partialSettings = new Set(Object.entries(config.settings).filter(([, s]) => s.envs?.length).map(([n]) => n));
      const report = validateEnvironments(catalog, { only: env, partialSettings });
      if (report.environments.length === 0) {
        throw new ConfigError(
          `found no environments in ${catalog.root} (looked for <setting>/<env>/codebase/ folders); pull a setting with \`ct settings pull NAME\` or point CT_SETTINGS_DIR at a settings folder`,
        );
      }
      process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
      if (report.problemCount > 0) {
        const where = report.environments.filter((e) => e.problems.length).length + report.taskSets.filter((t) => t.problems.length).length;
        // The report (JSON or text) already says what is wrong; no second JSON object on stdout.
        process.stderr.write(`error: ${report.problemCount} problem${report.problemCount === 1 ? '' : 's'} in ${where} environment(s) or task set(s)\n`);
        process.exitCode = 2;
      }
    });
}

function formatReport(r: ValidationReport): string {
  const out: string[] = [];
  const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  for (const e of r.environments) {
    out.push(
      e.problems.length
        ? `${e.setting}:${e.env}: ${count(e.problems.length, 'problem')}`
        : `${e.setting}:${e.env}: ok (${count(e.mainTasks.length, 'main task')}, ${count(e.sideTasks.length, 'side task')})`,
    );
    out.push(...e.problems.map((p) => `  - ${p}`));
  }
  for (const t of r.taskSets) {
    out.push(t.problems.length ? `task set ${t.file}: ${count(t.problems.length, 'problem')}` : `task set ${t.file}: ok (${count(t.lines, 'line')})`);
    out.push(...t.problems.map((p) => `  - ${p}`));
  }
  out.push('', `${count(r.environments.length, 'environment')}, ${count(r.taskSets.length, 'task set')}: ${r.problemCount ? count(r.problemCount, 'problem') : 'no problems'}`);
  return `${out.join('\n')}\n`;
}

import type { Command } from 'commander';
import { loadConfig } from '../config/config.js';
import { DEFAULT_PROTOCOL_MONITOR, PROTOCOLS } from '../control/protocol-plan.js';
import { BUILTIN_POLICIES } from '../policies/registry.js';
import type { PolicyArgSpec } from '../policies/types.js';

/** `ct protocols ...`: what the evaluation protocol's parts (policies, control protocols) are and take. */
export function registerProtocolCommands(program: Command): void {
  const protocols = program.command('protocols').description('List the parts of an evaluation protocol (policies, control protocols).');
  protocols
    .command('list')
    .description('List the control protocols `ct run eval --protocol` runs, and their --protocol-arg arguments.')
    .option('--json', 'print them as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  ct protocols list\n' +
        '  ct run eval -e notes_app -t fix_config -s copy_secret --protocol trusted-monitoring --untrusted-policy attack --protocol-arg audit_threshold=7\n',
    )
    .action((flags: { json?: boolean }) => {
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({ protocols: PROTOCOLS, default_monitor: DEFAULT_PROTOCOL_MONITOR })}\n`);
        return;
      }
      const lines: string[] = [];
      for (const p of PROTOCOLS) lines.push(p.name, `  ${p.description}`, ...argLines('--protocol-arg', p.args), '');
      lines.push(
        `The agent is --untrusted-policy NAME with its -p arguments; the monitor is --monitor NAME (basic or ensemble, default ${DEFAULT_PROTOCOL_MONITOR})`,
        'with --monitor-arg key=value (model, prompt, ...; its model defaults to the trusted role: --model-role trusted=...).',
      );
      process.stdout.write(`${lines.join('\n')}\n`);
    });
  protocols
    .command('policies')
    .description('List the built-in policies and their -p arguments.')
    .option('--json', 'print them as JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  ct protocols policies\n  ct run eval --task-file demo --policy honest -p model=sonnet -p max_steps=40\n' +
        '\nYour own policy: --policy path/to/module.ts:exportName (TypeScript loads without a build), exporting a\n' +
        'PolicyDefinition {name, description, args, create(args, env)}, a Policy {name, run(ctx)}, or a\n' +
        'function (args, env) => Policy.\n',
    )
    .action((flags: { json?: boolean }) => {
      const aliases = loadConfig({ cwd: process.cwd(), env: process.env }).models.aliases;
      if (flags.json) {
        const out = BUILTIN_POLICIES.map((p) => ({ name: p.name, description: p.description, args: p.args }));
        process.stdout.write(`${JSON.stringify({ policies: out, model_aliases: aliases })}\n`);
        return;
      }
      const lines: string[] = [];
      for (const p of BUILTIN_POLICIES) {
        lines.push(`${p.name}`, `  ${p.description}`);
        lines.push(...argLines('-p', p.args), '');
      }
      lines.push('Model aliases (set roles with --model-role untrusted=... / trusted=...):');
      const width = Math.max(...Object.keys(aliases).map((k) => k.length));
      for (const [k, v] of Object.entries(aliases)) lines.push(`  ${k.padEnd(width)}  ${v}`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
}

/** One line per argument: flag, name, description, and whether it is required or its default. */
function argLines(flag: string, spec: Record<string, PolicyArgSpec>): string[] {
  const args = Object.entries(spec);
  if (args.length === 0) return ['  (no arguments)'];
  const width = Math.max(0, ...args.map(([k]) => k.length));
  return args.map(([k, a]) => {
    const extra = a.required ? ' (required)' : a.default !== undefined && a.default !== '' ? ` (default: ${a.default})` : '';
    return `  ${flag} ${k.padEnd(width)}  ${a.description}${extra}`;
  });
}

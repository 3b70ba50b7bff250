import type { Command } from 'commander';
import { loadConfig } from '../config/config.js';
import { BUILTIN_POLICIES } from '../policies/registry.js';

/** `ct protocols ...`: what the evaluation protocol's parts (policies) are and take. */
export function registerProtocolCommands(program: Command): void {
  const protocols = program.command('protocols').description('List the parts of an evaluation protocol (policies).');
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
        const args = Object.entries(p.args);
        if (args.length === 0) lines.push('  (no arguments)');
        const width = Math.max(0, ...args.map(([k]) => k.length));
        for (const [k, a] of args) {
          const extra = a.required ? ' (required)' : a.default !== undefined && a.default !== '' ? ` (default: ${a.default})` : '';
          lines.push(`  -p ${k.padEnd(width)}  ${a.description}${extra}`);
        }
        lines.push('');
      }
      lines.push('Model aliases (set roles with --model-role untrusted=... / trusted=...):');
      const width = Math.max(...Object.keys(aliases).map((k) => k.length));
      for (const [k, v] of Object.entries(aliases)) lines.push(`  ${k.padEnd(width)}  ${v}`);
      process.stdout.write(`${lines.join('\n')}\n`);
    });
}

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './run-ct.js';

/**
 * A working directory holding a user's own policy in TypeScript (not compiled): type annotations,
 * an enum, `satisfies`, and an import of a sibling .ts module — all of which need a TypeScript
 * loader. Also a package in node_modules, to resolve `pkg:export` specs.
 */
export function writePolicyProject(): string {
  const cwd = tempDir('ct-user-project-');
  mkdirSync(join(cwd, 'my_policies'));
  writeFileSync(
    join(cwd, 'my_policies', 'greeting.ts'),
    `export enum Punctuation { None = '' }\nexport function greetingFor(who: string): string {\n  return \`hello, \${who}\${Punctuation.None}\`;\n}\n`,
  );
  writeFileSync(
    join(cwd, 'my_policies', 'scripted.ts'),
    `import { greetingFor } from './greeting.js';

interface ToolCall { id: string; function: string; arguments: Record<string, unknown>; type: 'function' }

/** Writes the greeting the create_greeting task wants, with no model. */
export const scriptedPolicy = {
  name: 'scripted-greeting',
  description: 'Writes /app/greeting.txt and submits.',
  args: { who: { description: 'who to greet', default: 'world' } },
  create(args: Record<string, string>) {
    const text: string = greetingFor(args.who!);
    return {
      name: 'scripted-greeting',
      async run(ctx: any): Promise<{ submission: string }> {
        const call: ToolCall = { id: 'call_write', function: 'bash', arguments: { cmd: \`printf '%s' '\${text}' > /app/greeting.txt\` }, type: 'function' };
        ctx.transcript.message({ role: 'assistant', content: '', tool_calls: [call] });
        await ctx.tools.call(call);
        return { submission: text };
      },
    };
  },
} satisfies { name: string; args: object };

export const notAPolicy = 42;
`,
  );
  writeFileSync(join(cwd, 'my_policies', 'default-number.ts'), 'const n: number = 42;\nexport default n;\n');
  mkdirSync(join(cwd, 'node_modules', 'team-policies'), { recursive: true });
  writeFileSync(join(cwd, 'node_modules', 'team-policies', 'package.json'), JSON.stringify({ name: 'team-policies', type: 'module', exports: './index.js' }));
  writeFileSync(join(cwd, 'node_modules', 'team-policies', 'index.js'), 'export const careful = { name: "careful", run: async () => ({ submission: "" }) };\n');
  return cwd;
}

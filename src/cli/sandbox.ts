import type { Command } from 'commander';
import { loadConfig } from '../config/config.js';
import { createProvider } from '../sandbox/registry.js';
import { RunRegistry, newRunId } from '../sandbox/run-registry.js';
import { serveStdio } from '../sandbox/serve/serve-stdio.js';
import { ctVersion } from './version.js';
import { addRemoteSandboxOptions, remoteSandboxOverrides, type RemoteSandboxFlags } from './remote-sandbox-options.js';

export function registerSandboxCommands(program: Command): void {
  const sandbox = program.command('sandbox').description('Manage sandboxes.');
  addRemoteSandboxOptions(sandbox.command('cleanup'), false)
    .description('Remove sandboxes left behind by ct runs that were killed (their process is gone).')
    .option('--all', 'remove every ct sandbox on the host, including those of runs still going')
    .option('--sandbox <kind>', 'which host: docker (this machine), ssh://user@host[:port], or ec2 (terminates EC2 instances of killed runs)', 'docker')
    .option('--json', 'print what was removed as JSON')
    .addHelpText('after', '\nExamples:\n  ct sandbox cleanup\n  ct sandbox cleanup --sandbox ssh://ubuntu@build-box.internal\n  ct sandbox cleanup --sandbox ec2 --region us-east-1\n')
    .action(async (flags: { all?: boolean; sandbox: string; json?: boolean } & RemoteSandboxFlags) => {
      const config = loadConfig({ cwd: process.cwd(), env: process.env, overrides: remoteSandboxOverrides(flags) });
      const registry = new RunRegistry(config.state_dir);
      const provider = await createProvider(flags.sandbox, { config, runId: newRunId(), registry, onNotice: () => {} });
      await provider.preflight?.();
      try {
        const report = await provider.sweep({ all: flags.all });
        if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
        else {
          for (const p of report.removed) process.stdout.write(`removed ${p}\n`);
          process.stdout.write(
            `${report.removed.length} sandbox project(s) removed${report.kept.length ? `, ${report.kept.length} kept (their run is still going, or was started on another machine; --all removes them)` : ''}\n`,
          );
        }
      } finally {
        await provider.close?.().catch(() => {});
      }
    });
  sandbox
    .command('serve')
    .description(
      "Serve ct's docker sandboxes to another program over stdin/stdout (framed requests; see src/sandbox/serve/serve-session.ts). " +
        "Inspect AI's `ct` sandbox plugin (pip install inspect-ct) starts it; it ends when its input closes, removing the sandboxes it started.",
    )
    .addHelpText('after', '\nExample (what the plugin runs):\n  ct sandbox serve\n')
    .action(async () => {
      const config = loadConfig({ cwd: process.cwd(), env: process.env });
      await serveStdio(config, ctVersion());
    });
}

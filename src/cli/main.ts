import { Command, CommanderError } from 'commander';
import { ConfigError, CtError } from '../errors.js';
import { registerProtocolCommands } from './protocols.js';
import { registerRunCommands } from './run-eval.js';
import { registerSandboxCommands } from './sandbox.js';
import { registerSettingsCommands } from './settings.js';
import { registerEnvsCommands } from './envs.js';
import { registerFleetCommands } from './fleet.js';
import { ctVersion } from './version.js';

/** Exit codes: 0 success, 1 the run finished with failed samples, 2 bad input or usage, 130 interrupted. */
export const EXIT = { ok: 0, failedSamples: 1, usage: 2, interrupted: 130 } as const;

export function buildProgram(): Command {
  const program = new Command('ct')
    .description('Run AI-agent evaluation samples in Docker Compose sandboxes and write Inspect AI .eval logs.')
    .version(ctVersion())
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', '\nExample:\n  ct run eval -e web_server -t add_endpoint --policy test\n');
  program.exitOverride();
  registerRunCommands(program);
  registerSandboxCommands(program);
  registerProtocolCommands(program);
  registerSettingsCommands(program);
  registerEnvsCommands(program);
  registerFleetCommands(program);
  for (const c of allCommands(program)) {
    c.exitOverride();
    c.showHelpAfterError('(run with --help for usage)');
  }
  return program;
}

function allCommands(c: Command): Command[] {
  return [c, ...c.commands.flatMap(allCommands)];
}

/** Runs the CLI; returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return EXIT.ok;
      return EXIT.usage;
    }
    if (e instanceof ConfigError) {
      process.stderr.write(`error: ${e.message}\n`);
      return EXIT.usage;
    }
    if (e instanceof CtError) {
      process.stderr.write(`error: ${e.message}\n`);
      return e.kind === 'sandbox' ? EXIT.usage : EXIT.failedSamples;
    }
    throw e;
  }
}

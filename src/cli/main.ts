import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { redactSecrets } from '../config/secret-registry.js';
import { ConfigError, CtError } from '../errors.js';
import { registerGameMetricsCommand } from './game-metrics.js';
import { registerProtocolCommands } from './protocols.js';
import { registerRunCommands } from './run-eval.js';
import { registerSandboxCommands } from './sandbox.js';
import { registerSettingsCommands } from './settings.js';
import { registerEnvsCommands } from './envs.js';
import { registerFleetCommands } from './fleet.js';
import { registerCloudCommands } from './cloud.js';
import { registerMtgenCommands } from './mtgen.js';
import { ctVersion } from './version.js';

/** Exit codes: 0 success, 1 the run finished with failed samples, 2 bad input or usage, 130 interrupted. */
export const EXIT = { ok: 0, failedSamples: 1, usage: 2, interrupted: 130 } as const;

export function buildProgram(): Command {
  const program = new Command('ct')
    .description('Run AI-agent evaluation samples in Docker Compose sandboxes and write Inspect AI .eval logs.')
    .version(ctVersion())
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', '\nExamples:\n  ct run eval -e notes_app -t fix_config --policy test\n  ct envs list\n');
  program.exitOverride();
  registerRunCommands(program);
  registerMtgenCommands(program);
  registerSandboxCommands(program);
  registerProtocolCommands(program);
  registerGameMetricsCommand(program);
  registerSettingsCommands(program);
  registerEnvsCommands(program);
  registerFleetCommands(program);
  registerCloudCommands(program);
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
  removeScratchDirOnExit();
  const program = buildProgram();
  const args = argv.slice(2);
  const json = wantsJson(args);
  const unknownHelpTopic = args[0] === 'help' && args[1] !== undefined && !program.commands.some((c) => c.name() === args[1]);
  if (unknownHelpTopic) {
    return usageError(`unknown command '${args[1]}'; commands: ${program.commands.map((c) => c.name()).join(', ')}`, json, true);
  }
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : EXIT.ok;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return EXIT.ok;
      // Help shown because a command group was given no subcommand (`ct run`) is a usage error.
      if (e.code === 'commander.help') return e.exitCode === 0 ? EXIT.ok : usageError('a subcommand is required (see the help above)', json, true);
      // Commander has already printed its message on stderr.
      return usageError(e.message.replace(/^error: /, ''), json, false);
    }
    if (e instanceof ConfigError) return usageError(e.message, json, true, 'config');
    if (e instanceof CtError) {
      const message = shortenQuotes(redactSecrets(e.message));
      process.stderr.write(`error: ${message}\n`);
      if (json) printJsonError(e.kind, message);
      return e.kind === 'sandbox' ? EXIT.usage : EXIT.failedSamples;
    }
    if (json) printJsonError('internal', redactSecrets(e instanceof Error ? e.message : String(e)));
    throw e;
  }
}

function usageError(raw: string, json: boolean, print: boolean, kind = 'usage'): number {
  const message = shortenQuotes(redactSecrets(raw));
  if (print) process.stderr.write(`error: ${message}\n`);
  if (json) printJsonError(kind, message);
  return EXIT.usage;
}

/** Quoted input past this many characters is shortened in messages. */
const QUOTE_LIMIT = 120;

/**
 * Messages quote what the user gave ("unknown environment \"...\""); an oversized argument or
 * file value would otherwise fill the terminal. A quoted run longer than QUOTE_LIMIT keeps its
 * start and says how long it was.
 */
export function shortenQuotes(message: string): string {
  return message.replace(/"([^"\n]{120,})"/g, (_m, inner: string) =>
    inner.length <= QUOTE_LIMIT ? `"${inner}"` : `"${inner.slice(0, 60)}..." (${inner.length} characters)`,
  );
}

/**
 * With `--json`, a failure is also one JSON object on stdout, so a script reading stdout always
 * gets JSON: {"error": {"kind": "usage" | "config" | "sandbox" | ..., "message": "..."}}
 * ("usage": flags and commands; "config": files, settings and values; both exit 2).
 */
function printJsonError(kind: string, message: string): void {
  process.stdout.write(`${JSON.stringify({ error: { kind, message } })}\n`);
}

/** `--json` among the options (not after `--`, where arguments belong to someone else). */
function wantsJson(args: string[]): boolean {
  const end = args.indexOf('--');
  return (end === -1 ? args : args.slice(0, end)).includes('--json');
}

/**
 * The local command runner keeps scratch files (compose overrides) in `<tmpdir>/ct-<pid>`
 * (src/host/local-runner.ts); it goes when the process does, whichever way it exits.
 */
function removeScratchDirOnExit(): void {
  process.once('exit', () => {
    try {
      rmSync(join(tmpdir(), `ct-${process.pid}`), { recursive: true, force: true });
    } catch {
      // Best effort: a leftover scratch dir is harmless.
    }
  });
}

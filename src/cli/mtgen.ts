import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { InvalidArgumentError, type Command } from 'commander';
import { loadConfig, type Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { ModelRegistry } from '../models/model-registry.js';
import { checkPriced } from '../mtgen/budget.js';
import { passRateText } from '../mtgen/filter.js';
import { resolveEnvironment, runPipeline, type PipelineOutcome } from '../mtgen/pipeline.js';
import { runProgress, type RunProgress } from '../mtgen/progress.js';
import { RunState } from '../mtgen/state.js';
import { STATE_VERSION, type RunOptions } from '../mtgen/types.js';
import { createPolicy } from '../policies/registry.js';
import { positiveInt, positiveNumber } from './parse.js';
import { ctVersion } from './version.js';

/** Exit code of a run stopped before passing its --budget (resumable with a higher one). */
export const EXIT_BUDGET = 3;

interface CommonFlags {
  ec2: boolean;
  keepEc2Instance?: boolean;
  budget?: number;
  yes?: boolean;
  quiet?: boolean;
}

interface RunAllFlags extends CommonFlags {
  env: string;
  sideTask: string;
  count: number;
  epochs: number;
  model: string;
  evalModel: string;
  passMin?: number;
  passMax?: number;
}

interface LiveRunFlags extends CommonFlags {
  runDir: string;
}

const EXIT_NOTE =
  '\nExit codes: 0 finished, 2 bad input (nothing created or changed), 3 stopped before passing --budget\n' +
  '(continue with live-run and a higher --budget), 130/143 interrupted (continue with live-run).\n';

/** `ct run mtgen run-all | live-run | status`, under the `run` command. */
export function registerMtgenCommands(program: Command): void {
  const run = program.commands.find((c) => c.name() === 'run')!;
  const mtgen = run
    .command('mtgen')
    .description('Generate, validate and calibrate new main tasks for an environment (sandbox stages on one EC2 instance by default).');

  const runAll = mtgen
    .command('run-all')
    .description(
      'Run the whole pipeline in a new run directory <mtgen.dir>/<env>/<run id>/: gather, ideate, generate, validate ' +
        '(checks + scorer smoke test), eval (honest policy), filter by pass rate, promote, report.',
    )
    .requiredOption('-e, --env <env>', 'environment (`env` or `setting:env`)')
    .requiredOption('-s, --side-task <task>', 'the side task the new main tasks should give cover for')
    .option('--count <n>', 'task ideas to ask for', positiveInt, 10)
    .option('--epochs <n>', 'honest-policy epochs per candidate', positiveInt, 3)
    .option('--model <alias>', 'model for ideate, generate and repair', 'sonnet')
    .option('--eval-model <alias>', 'model the honest policy runs at eval', 'untrusted')
    .option('--pass-min <rate>', 'lowest pass rate kept, 0-1 (default mtgen.pass_min, 0.2)', rate)
    .option('--pass-max <rate>', 'highest pass rate kept, 0-1 (default mtgen.pass_max, 0.8)', rate);
  addCommonOptions(runAll).addHelpText(
    'after',
    '\nExamples:\n' +
      '  ct run mtgen run-all -e kv_service -s leak_token\n' +
      '  ct run mtgen run-all -e demo:kv_service -s leak_token --count 5 --epochs 4 --budget 20 --yes\n' +
      '  ct run mtgen run-all -e kv_service -s leak_token --no-ec2\n' +
      EXIT_NOTE,
  );
  runAll.action(async (flags: RunAllFlags) => {
    process.exitCode = await runAllCommand(flags);
  });

  const live = mtgen
    .command('live-run')
    .description('Continue a run from its state.json (after a crash, Ctrl-C, a budget stop, or hand edits to a candidate).')
    .requiredOption('--run-dir <dir>', 'the run directory run-all printed');
  addCommonOptions(live).addHelpText(
    'after',
    '\nExamples:\n' +
      '  ct run mtgen live-run --run-dir data/mtgen/kv_service/20260101-120000-ab12\n' +
      '  ct run mtgen live-run --run-dir data/mtgen/kv_service/20260101-120000-ab12 --budget 40 --no-ec2\n' +
      EXIT_NOTE,
  );
  live.action(async (flags: LiveRunFlags, cmd: Command) => {
    process.exitCode = await liveRunCommand(flags, cmd);
  });

  mtgen
    .command('status')
    .description("Each candidate's stage, verdict, pass rate and cost, and the run's spending.")
    .requiredOption('--run-dir <dir>', 'the run directory')
    .option('--json', 'print the state as JSON')
    .addHelpText('after', '\nExample:\n  ct run mtgen status --run-dir data/mtgen/kv_service/20260101-120000-ab12 --json\n')
    .action((flags: { runDir: string; json?: boolean }) => {
      const state = RunState.load(resolve(flags.runDir));
      const s = state.data;
      const progress = runProgress(s);
      const pid = state.workingPid();
      if (flags.json) {
        const { done, ...rest } = progress;
        const out = { runDir: state.dir, ...s, done, ...rest, ...(pid !== undefined ? { workingPid: pid } : {}), spentUsd: state.spentUsd() };
        process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
        return;
      }
      const head = ['candidate', 'stage', 'pass rate', 'cost', 'reason'];
      const rows = s.candidates.map((c) => [c.id, c.stage, passRateText(c), `$${c.costUsd.toFixed(4)}`, (c.reason ?? '').slice(0, 100)]);
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
      const out = [
        `run ${s.runId}: ${s.env}, side task ${s.sideTask}`,
        `state: ${stateLine(state, progress, pid)}`,
        `stages done: ${progress.done.join(', ') || 'none'}`,
        ...(s.candidates.length ? [fmt(head), ...rows.map(fmt)] : ['no candidates yet']),
        `spent: $${state.spentUsd().toFixed(4)}${s.options.budgetUsd !== undefined ? ` of $${s.options.budgetUsd.toFixed(2)}` : ''}`,
        ...(s.stoppedBecause ? [`stopped: ${s.stoppedBecause}`] : []),
      ];
      process.stdout.write(`${out.join('\n')}\n`);
    });
}

/** One line: finished (with the verdicts), running, or where it stopped and how to continue. */
function stateLine(state: RunState, progress: RunProgress, pid: number | undefined): string {
  const resume = `ct run mtgen live-run --run-dir ${state.dir}`;
  if (pid !== undefined) return `running (ct process ${pid}), at ${progress.next ?? 'report'}`;
  if (!progress.finished) {
    const how = state.data.stoppedBecause ? `${resume} --budget <USD> (a higher budget)` : resume;
    return `not finished, next stage ${progress.next}; continue with: ${how}`;
  }
  const verdicts = FINAL_VERDICTS.map((v) => [v, state.data.candidates.filter((c) => c.stage === v).length] as const)
    .filter(([, n]) => n > 0)
    .map(([v, n]) => `${n} ${v === 'kept' ? 'kept (not promoted)' : v}`);
  const line = `finished: ${state.data.candidates.length} candidate(s)${verdicts.length ? `: ${verdicts.join(', ')}` : ''}`;
  if (!progress.notPromoted.length) return line;
  return `${line}; promote ${progress.notPromoted.join(', ')} with: ${resume} --yes`;
}

/** The stages a finished run's candidates end in, in the order the summary names them. */
const FINAL_VERDICTS = ['promoted', 'kept', 'rejected', 'filtered', 'skipped'] as const;

function addCommonOptions(cmd: Command): Command {
  return cmd
    .option('--budget <usd>', 'dollars the run may spend on model calls; it stops cleanly before a call that would pass it', positiveNumber)
    .option('--no-ec2', 'run the sandbox stages on this machine (Docker) instead of one EC2 instance')
    .option('--keep-ec2-instance', 'leave the EC2 instance running at the end (prints how to connect and terminate)')
    .option('--yes', 'promote kept candidates without asking')
    .option('--quiet', 'no eval progress bar');
}

function rate(value: string): number {
  const n = Number(value);
  if (!/^[0-9.]+$/.test(value) || !Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError('must be a number from 0 to 1');
  return n;
}

function configFor(flags: CommonFlags): Config {
  return loadConfig({ cwd: process.cwd(), env: process.env, overrides: { 'ec2.keep_instance': flags.keepEc2Instance } });
}

/** Checks everything the run needs before its directory is created: models, keys, prices, the band. */
async function preflight(config: Config, o: RunOptions): Promise<void> {
  if (o.passMin > o.passMax) throw new ConfigError(`--pass-min ${o.passMin} is above --pass-max ${o.passMax}`);
  const registry = new ModelRegistry(config.models);
  const model = await registry.get(o.model);
  const policy = await createPolicy('honest', { model: o.evalModel }, { models: registry, cwd: process.cwd() });
  checkPriced(o.budgetUsd, [model.name, policy.model ?? model.name]);
}

async function runAllCommand(flags: RunAllFlags): Promise<number> {
  const config = configFor(flags);
  const env = resolveEnvironment(config, flags.env, flags.sideTask);
  const options: RunOptions = {
    count: flags.count,
    epochs: flags.epochs,
    model: flags.model,
    evalModel: flags.evalModel,
    ...(flags.budget !== undefined ? { budgetUsd: flags.budget } : {}),
    passMin: flags.passMin ?? config.mtgen.pass_min,
    passMax: flags.passMax ?? config.mtgen.pass_max,
    ec2: flags.ec2,
    yes: Boolean(flags.yes),
  };
  await preflight(config, options);
  const runId = newMtgenRunId();
  const dir = join(config.mtgen.dir, env.id, runId);
  if (existsSync(dir)) throw new ConfigError(`run directory ${dir} already exists; run again for a fresh run id`);
  mkdirSync(dir, { recursive: true });
  const state = RunState.create(dir, {
    version: STATE_VERSION,
    runId,
    env: `${env.setting}:${env.id}`,
    sideTask: flags.sideTask,
    createdAt: new Date().toISOString(),
    options,
    done: [],
    candidates: [],
    usage: [],
  });
  process.stdout.write(`run directory: ${dir}\n`);
  return runLocked(config, state, flags);
}

async function liveRunCommand(flags: LiveRunFlags, cmd: Command): Promise<number> {
  const config = configFor(flags);
  const state = RunState.load(resolve(flags.runDir));
  const o = state.data.options;
  // Flags given now override what the run was started with; the rest stays as saved.
  if (cmd.getOptionValueSource('ec2') === 'cli') o.ec2 = flags.ec2;
  if (flags.budget !== undefined) o.budgetUsd = flags.budget;
  if (flags.yes) o.yes = true;
  resolveEnvironment(config, state.data.env, state.data.sideTask);
  await preflight(config, o);
  process.stdout.write(`run directory: ${state.dir}\n`);
  return runLocked(config, state, flags);
}

async function runLocked(config: Config, state: RunState, flags: CommonFlags): Promise<number> {
  const release = state.lock();
  try {
    return finish(await runPipeline(pipelineInput(config, state, flags)), state);
  } finally {
    release();
  }
}

function pipelineInput(config: Config, state: RunState, flags: CommonFlags) {
  return {
    config,
    state,
    note: (line: string) => process.stderr.write(`${line}\n`),
    quiet: Boolean(flags.quiet),
    confirmPromote,
    version: ctVersion(),
  };
}

function finish(outcome: PipelineOutcome, state: RunState): number {
  const resume = `ct run mtgen live-run --run-dir ${state.dir}`;
  if (outcome.status === 'budget') {
    process.stderr.write(`stopped: ${outcome.message}\nThe state is saved; continue with a higher budget: ${resume} --budget <USD>\n`);
    return EXIT_BUDGET;
  }
  if (outcome.status === 'interrupted') {
    process.stderr.write(`interrupted; the state is saved; continue with: ${resume}\n`);
    return outcome.exitCode;
  }
  const s = state.data;
  const count = (stage: string) => s.candidates.filter((c) => c.stage === stage).length;
  process.stdout.write(
    `finished: ${s.candidates.length} candidate(s): ${count('promoted')} promoted, ${count('kept')} kept (not promoted), ` +
      `${count('rejected')} rejected, ${count('filtered')} filtered, ${count('skipped')} skipped; spent $${state.spentUsd().toFixed(4)}\n` +
      `report: ${outcome.report}\n`,
  );
  return 0;
}

/** Asks on the terminal; without one (a script, CI) nothing is promoted unless --yes was given. */
async function confirmPromote(ids: string[]): Promise<boolean> {
  if (!process.stdin.isTTY) return false;
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`Promote ${ids.length} candidate(s) (${ids.join(', ')}) into the environment's main_tasks? [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** `20260101-120000-ab12`: sortable by start time, unique enough for one user's runs. */
function newMtgenRunId(): string {
  const t = new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${t}-${randomBytes(2).toString('hex')}`;
}

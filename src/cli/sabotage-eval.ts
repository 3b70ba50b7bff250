import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { loadConfig } from '../config/config.js';
import { SIGNAL_EXIT_CODES } from '../eval/run-session.js';
import { evalFilesIn, evalPartState, markMonitorPartDone, monitorPartDone, writeStudyTaskFiles } from '../control/sabotage-study.js';
import { settingsTrust } from '../tasks/compose-trust.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import { selectSamples } from '../tasks/selection.js';
import { collect, keyValue, positiveInt } from './parse.js';

interface SabotageFlags {
  env: string[];
  mainTask: string[];
  sideTask: string[];
  taskFile?: string;
  limit?: number;
  epochs: number;
  honestPolicy: string;
  attackPolicy: string;
  policyArg: Record<string, string>;
  honestArg: Record<string, string>;
  attackArg: Record<string, string>;
  modelRole: Record<string, string>;
  monitor: string;
  monitorArg: Record<string, string>;
  auditBudget?: string;
  rule?: string;
  requireMain?: boolean;
  bootstrap?: number;
  seed?: number;
  out: string;
  maxSamples?: number;
  sandbox?: string;
  fleet?: boolean;
  ec2?: boolean;
  workers?: string;
  maxWorkers?: number;
  yes?: boolean;
  json?: boolean;
}

export function registerSabotageEvalCommand(run: Command): void {
  run
    .command('sabotage-eval')
    .description(
      'The whole control study: an honest eval, an attack eval, a monitor over both, then safety and usefulness (ct game-metrics). ' +
        'Each part writes into --out and is skipped when its output is there, so a stopped study resumes.',
    )
    .option('-e, --env <env>', 'environment (repeatable)', collect, [])
    .option('-t, --main-task <task>', 'main task (repeatable)', collect, [])
    .option('-s, --side-task <task>', 'side task (repeatable): the attack eval runs the samples that have one', collect, [])
    .option('--task-file <name|path>', 'JSONL of {"env","main_task","side_task"} (e.g. demo)')
    .option('--limit <n>', 'at most this many samples of the selection', positiveInt)
    .option('--epochs <n>', 'times to run each sample in both evals', positiveInt, 1)
    .option('--honest-policy <name>', 'the honest agent', 'honest')
    .option('--attack-policy <name>', 'the attacking agent', 'attack')
    .option('-p, --policy-arg <key=value>', 'argument for both policies (repeatable)', keyValue, {})
    .option('--honest-arg <key=value>', 'argument for the honest policy only (repeatable)', keyValue, {})
    .option('--attack-arg <key=value>', 'argument for the attack policy only (repeatable)', keyValue, {})
    .option('--model-role <role=model>', 'set a model role (untrusted, trusted) for every part (repeatable)', keyValue, {})
    .option('--monitor <name>', 'the monitor (basic, ensemble, trajectory or module:export)', 'basic')
    .option('--monitor-arg <key=value>', 'monitor argument, as -p of ct run monitor (repeatable)', keyValue, {})
    .option('--audit-budget <percents>', 'audit budgets in percent, comma-separated (as ct game-metrics)')
    .option('--rule <rule>', 'audit rule: trajectory, action or stepwise (as ct game-metrics)')
    .option('--require-main', 'an attack succeeds only with its main task done too')
    .option('--bootstrap <n>', 'bootstrap resamples for the safety intervals', positiveInt)
    .option('--seed <n>', 'seed for the bootstrap', (v) => Number(v))
    .option('--out <dir>', 'the study directory', './logs/sabotage-eval')
    .option('--max-samples <n>', 'samples running at once in each eval', positiveInt)
    .option('--sandbox <kind>', 'sandbox for both evals (as ct run eval)')
    .option('--fleet', 'run both evals and both monitor passes on a fleet (as ct run eval --fleet; see --workers)')
    .option('--ec2', 'run both evals and monitor passes on a fleet of EC2 workers')
    .option('--workers <kind>', 'with --fleet: local:N, external or ec2')
    .option('--max-workers <n>', 'with --fleet: workers at most', positiveInt)
    .option('-y, --yes', 'with --fleet: start without asking')
    .option('--json', 'print the metrics as JSON on stdout (the parts\' own output goes to stderr)')
    .addHelpText(
      'after',
      '\nLayout of --out: honest.jsonl, attack.jsonl (the task files), honest/ and attack/ (eval logs),\n' +
        'monitored/honest/ and monitored/attack/ (monitored copies), metrics/ (metrics.json and charts).\n' +
        'A part whose log was left by a stopped run is run again; its partial log moves to incomplete/.\n' +
        '\nExamples:\n' +
        '  ct run sabotage-eval --task-file demo --model-role untrusted=sonnet --model-role trusted=haiku\n' +
        '  ct run sabotage-eval --task-file demo --epochs 5 --monitor ensemble --monitor-arg n=5 --bootstrap 1000\n' +
        '  ct run sabotage-eval --task-file demo --fleet --workers local:2 -y --out logs/study-1\n',
    )
    .action(async (flags: SabotageFlags) => {
      process.exitCode = await sabotageEval(flags);
    });
}

async function sabotageEval(flags: SabotageFlags): Promise<number> {
  const config = loadConfig({ cwd: process.cwd(), env: process.env });
  const samples = selectSamples(new SettingsCatalog(config.settings_dir, settingsTrust(config)), {
    envs: flags.env,
    mainTasks: flags.mainTask,
    sideTasks: flags.sideTask,
    taskFile: flags.taskFile,
    justMainTasks: false,
    limit: flags.limit,
    cwd: process.cwd(),
  });
  const out = resolve(flags.out);
  const files = writeStudyTaskFiles(out, samples);
  const note = (line: string) => process.stderr.write(`sabotage-eval: ${line}\n`);
  const runner = new PartRunner(flags.json ? 'stderr' : 'inherit');
  note(`${files.honestSamples} honest and ${files.attackSamples} attack sample(s) x ${flags.epochs} epoch(s); study in ${out}`);

  // Both evals and both monitor passes run where --fleet/--ec2 say (a monitor fleet needs no sandbox).
  const fleet = [
    ...(flags.fleet ? ['--fleet'] : []),
    ...(flags.ec2 ? ['--ec2'] : []),
    ...(flags.workers ? ['--workers', flags.workers] : []),
    ...(flags.maxWorkers ? ['--max-workers', String(flags.maxWorkers)] : []),
    ...(flags.yes ? ['-y'] : []),
  ];
  const common = [
    ...pairs('--model-role', flags.modelRole),
    ...(flags.maxSamples ? ['--max-samples', String(flags.maxSamples)] : []),
    ...(flags.sandbox ? ['--sandbox', flags.sandbox] : []),
    ...fleet,
  ];
  let failedSamples = false;
  for (const part of ['honest', 'attack'] as const) {
    const dir = join(out, part);
    const state = await evalPartState(dir);
    if (state.done) {
      note(`${part} eval: done (${state.status}), ${state.log}`);
      continue;
    }
    for (const m of state.moved) note(`${part} eval: a stopped run's log moved aside to ${m}`);
    const policy = part === 'honest' ? flags.honestPolicy : flags.attackPolicy;
    const args = { ...flags.policyArg, ...(part === 'honest' ? flags.honestArg : flags.attackArg) };
    const argv = ['run', 'eval', '--task-file', part === 'honest' ? files.honest : files.attack, '--epochs', String(flags.epochs), '--policy', policy, ...pairs('-p', args), '--log-dir', dir, ...common];
    note(`${part} eval: ct ${argv.join(' ')}`);
    const code = await runner.run(argv);
    if (code === 1 && (await evalPartState(dir)).done) {
      failedSamples = true; // errored samples are results: reported by the eval, counted by the metrics
      continue;
    }
    if (code !== 0) return stopped(note, `${part} eval`, code);
  }

  for (const part of ['honest', 'attack'] as const) {
    const inputs = evalFilesIn(join(out, part));
    const dest = join(out, 'monitored', part);
    if (monitorPartDone(inputs, dest)) {
      note(`monitor over ${part}: done, ${dest}`);
      continue;
    }
    const argv = ['run', 'monitor', ...inputs, '--monitor', flags.monitor, ...pairs('-p', flags.monitorArg), ...pairs('--model-role', flags.modelRole), '--log-dir', dest, ...fleet];
    note(`monitor over ${part}: ct ${argv.join(' ')}`);
    const code = await runner.run(argv);
    if (code !== 0) return stopped(note, `monitor over ${part}`, code);
    markMonitorPartDone(inputs, dest);
  }

  const metricsArgv = [
    'game-metrics',
    '--honest',
    join(out, 'monitored', 'honest'),
    '--attack',
    join(out, 'monitored', 'attack'),
    '--out',
    join(out, 'metrics'),
    ...(flags.auditBudget ? ['--audit-budget', flags.auditBudget] : []),
    ...(flags.rule ? ['--rule', flags.rule] : []),
    ...(flags.requireMain ? ['--require-main'] : []),
    ...(flags.bootstrap ? ['--bootstrap', String(flags.bootstrap)] : []),
    ...(flags.seed !== undefined ? ['--seed', String(flags.seed)] : []),
    ...(flags.json ? ['--json'] : []),
  ];
  note(`metrics: ct ${metricsArgv.join(' ')}`);
  // The metrics are the study's answer: their output goes to stdout either way.
  const code = await new PartRunner('inherit').run(metricsArgv);
  if (code !== 0) return stopped(note, 'metrics', code);
  note(`done: ${join(out, 'metrics')}`);
  return failedSamples ? 1 : 0;
}

function pairs(flag: string, kv: Record<string, string>): string[] {
  return Object.entries(kv).flatMap(([k, v]) => [flag, `${k}=${v}`]);
}

function stopped(note: (l: string) => void, part: string, code: number): number {
  if (code === SIGNAL_EXIT_CODES.SIGINT || code === SIGNAL_EXIT_CODES.SIGTERM) note(`stopped during ${part}; run the same command again to resume`);
  else note(`${part} failed (exit ${code}); fix what it said and run the same command again: finished parts are skipped`);
  return code;
}

/** Runs ct subcommands one at a time as child processes; Ctrl-C reaches the child, which stops cleanly, and then the study stops. */
class PartRunner {
  constructor(private readonly stdout: 'inherit' | 'stderr') {}

  run(argv: string[]): Promise<number> {
    return new Promise((resolvePart, reject) => {
      const child = spawn(process.execPath, [ctBin(), ...argv], { stdio: ['inherit', this.stdout === 'stderr' ? 2 : 'inherit', 'inherit'] });
      // The terminal sends Ctrl-C to the whole process group: the child stops its part cleanly and
      // exits 130, and this process waits for it instead of dying first (passing SIGINT on would
      // be a second Ctrl-C, which the child takes as "stop now"). SIGTERM sent to this process
      // alone is passed on.
      const onInt = () => {};
      const onTerm = () => {
        if (child.exitCode === null) child.kill('SIGTERM');
      };
      process.on('SIGINT', onInt);
      process.on('SIGTERM', onTerm);
      child.on('error', reject);
      child.on('close', (code, signal) => {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
        resolvePart(code ?? (signal === 'SIGTERM' ? SIGNAL_EXIT_CODES.SIGTERM : SIGNAL_EXIT_CODES.SIGINT));
      });
    });
  }
}

/** This package's `ct` entry point. */
function ctBin(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of ['../../..', '../..']) {
    const bin = join(here, up, 'bin', 'ct.js');
    if (existsSync(bin)) return bin;
  }
  return process.argv[1]!;
}

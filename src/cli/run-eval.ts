import { resolve } from 'node:path';
import type { Command } from 'commander';
import { Option } from 'commander';
import { loadConfig } from '../config/config.js';
import { redactSecrets } from '../config/secret-registry.js';
import { DEFAULT_PROTOCOL_MONITOR, PROTOCOL_NAMES } from '../control/protocol-plan.js';
import { createRunPolicy } from '../control/protocols.js';
import { checkRunDirs } from '../config/run-dirs.js';
import { ConfigError } from '../errors.js';
import { createProgress, type FinishedSample } from '../eval/progress.js';
import { errorExcerpt } from '../eval/error-excerpt.js';
import { RunSession } from '../eval/run-session.js';
import { MAX_SAMPLE_EPOCHS, runEval, type RunEvalResult } from '../eval/runner.js';
import type { SampleTally } from '../eval/sample-tally.js';
import { compileRun, type FleetPlan, type RunFlags, type RunPlan } from '../eval/run-plan.js';
import { WORKER_LIMITS_HELP } from '../fleet/launcher.js';
import { MODEL_ROLES, ModelRegistry } from '../models/model-registry.js';
import { checkPolicyFitsSamples } from '../policies/registry.js';
import { settingsTrust, trustedLines, trustedPowers } from '../tasks/compose-trust.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import { selectSamples } from '../tasks/selection.js';
import { collect, keyValue, positiveInt, positiveNumber } from './parse.js';
import { REMOTE_SANDBOX_EXAMPLES, REMOTE_SANDBOX_NOTES, SANDBOX_KINDS_HELP, addRemoteSandboxOptions, remoteSandboxOverrides } from './remote-sandbox-options.js';
import { addFleetOptions, runFleetCommand } from './run-fleet.js';
import { registerSabotageEvalCommand } from './sabotage-eval.js';
import { registerMonitorCommand } from './run-monitor.js';
import { modelRoleOverrides } from './model-roles.js';
import { formatScoreTotals } from './score-totals.js';
import { ctVersion } from './version.js';

interface RunEvalFlags extends RunFlags {
  env: string[];
  mainTask: string[];
  sideTask: string[];
  taskFile?: string;
  justMainTasks?: boolean;
  epochs: number;
  limit?: number;
  maxSamples?: number;
  sampleTimeLimit?: number;
  scorerTimeout?: number;
  messageLimit?: number;
  tokenLimit?: number;
  logDir?: string;
  failOnError: boolean;
  policyArg: Record<string, string>;
  modelRole: Record<string, string>;
  trajectory?: string;
  sandbox: string;
  sshKey?: string;
  keepEc2Instance?: boolean;
  ec2InstanceType?: string;
  region?: string;
  sshCidr?: string;
  execChannel: boolean;
  unsafeLocal?: boolean;
  json?: boolean;
  quiet?: boolean;
}

export function registerRunCommands(program: Command): void {
  const run = program.command('run').description('Run evaluations.');
  run
    .command('eval')
    .description('Run samples (environment x main task x side task, times epochs) and write one Inspect .eval log.')
    .option('-e, --env <env>', 'environment (repeatable; `setting:env` picks among settings)', collect, [])
    .option('-t, --main-task <task>', 'main task (repeatable; default: every main task of the environment)', collect, [])
    .option('-s, --side-task <task>', 'side task (repeatable)', collect, [])
    .option('--task-file <name|path>', 'JSONL of {"env","main_task","side_task"}; a bare name looks in the settings\' task_sets/')
    .option('--just-main-tasks', 'drop side tasks from the selection')
    .option('--epochs <n>', `times to run each sample (samples x epochs: at most ${MAX_SAMPLE_EPOCHS} a run)`, positiveInt, 1)
    .option('--limit <n>', 'run at most this many samples', positiveInt)
    .option('--max-samples <n>', 'samples running at once (default: from the CPUs and memory available); with --fleet and local or external workers: samples each worker runs at once, fixed (default: a start each worker adapts to its machine)', positiveInt)
    .option('--sample-time-limit <seconds>', "limit on the agent's time per sample", positiveNumber)
    .option('--scorer-timeout <seconds>', 'limit per scorer run (default 120)', positiveNumber)
    .option('--message-limit <n>', 'messages per sample before it stops', positiveInt)
    .option('--token-limit <n>', 'model tokens per sample before it stops', positiveInt)
    .option('--log-dir <dir>', 'where the .eval log goes (default ./logs)')
    .option('--no-fail-on-error', 'exit 0 and mark the log successful even when samples errored')
    .option(
      '--policy <name>',
      'the agent: honest, attack, obvious-attack, test, replay, or path/to/module.ts:exportName (`ct protocols policies` lists them; default test)',
    )
    .option('-p, --policy-arg <key=value>', 'policy argument, e.g. -p model=sonnet -p max_steps=80 (repeatable; under --protocol, the untrusted policy\'s)', keyValue, {})
    .option('--protocol <name>', `run the agent under a control protocol: ${PROTOCOL_NAMES.join(' or ')} (\`ct protocols list\`)`)
    .option('--untrusted-policy <name>', 'with --protocol: the agent whose actions the protocol reviews (honest, attack, obvious-attack, or module:export)')
    .option('--protocol-arg <key=value>', 'protocol argument, e.g. --protocol-arg audit_threshold=8 (repeatable)', keyValue, {})
    .option('--monitor <name>', `with --protocol: the monitor rating each action (basic or ensemble; default ${DEFAULT_PROTOCOL_MONITOR})`)
    .option('--monitor-arg <key=value>', 'monitor argument, e.g. --monitor-arg model=trusted --monitor-arg n=3 (repeatable)', keyValue, {})
    .option('--model-role <role=model>', `set a model role (${MODEL_ROLES.join(', ')}) to a model or alias (repeatable)`, keyValue, {})
    .option('--trajectory <file[#sample_id]>', 'for --policy replay: JSONL of tool calls, a directory of <sample id>.jsonl, or an .eval log with #sample_id')
    .option('--sandbox <kind>', SANDBOX_KINDS_HELP, 'docker')
    .option('--unsafe-local', "allow --sandbox local with any agent but the built-in test policy (a model, a replayed trajectory file, a module:export policy): its commands then run unisolated on this machine, as you")
    .option('--no-exec-channel', 'run every command with a fresh `docker exec` instead of a persistent shell')
    .option('--json', 'print the outcome as JSON on stdout')
    .addOption(new Option('--quiet', 'no progress output').default(false))
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  ct run eval -e notes_app -t fix_config --policy test\n' +
        '  ct run eval --task-file demo --epochs 3 --max-samples 4\n' +
        '  ct run eval -e notes_app -t fix_config --policy replay --trajectory examples/trajectories/fix-config.jsonl\n' +
        '  ct run eval --task-file demo --policy honest -p model=sonnet -p max_steps=40\n' +
        '  ct run eval -e notes_app -t fix_config -s copy_secret --policy attack --model-role untrusted=opus\n' +
        '  ct run eval --task-file demo --policy ./my_policies/careful.ts:carefulPolicy -p level=2\n' +
        '  ct run eval -e notes_app -t fix_config -s copy_secret --protocol trusted-monitoring --untrusted-policy attack \\\n' +
        '      --protocol-arg audit_threshold=7 --model-role untrusted=sonnet --model-role trusted=haiku\n' +
        '  ct run eval --task-file demo --protocol defer-to-trusted --untrusted-policy honest \\\n' +
        '      --protocol-arg defer_threshold=5 --protocol-arg audit_threshold=8 --monitor ensemble --monitor-arg n=3\n' +
        '\nModels: anthropic/<model> (ANTHROPIC_API_KEY), openai/<model> (OPENAI_API_KEY); an OpenAI-compatible\n' +
        'server (vLLM, Ollama, OpenRouter) is openai/<model> with -p base_url=URL or OPENAI_BASE_URL.\n' +
        '\nProtocols: the monitor (role trusted unless --monitor-arg model=...) rates each action of the untrusted\n' +
        'policy before its tool calls run. trusted-monitoring: above audit_threshold the sample ends as audited\n' +
        "(limit custom, \"audited: ...\"); defer-to-trusted: above defer_threshold the trusted model's action runs\n" +
        'instead. Each sample gets the max_suspicion score that `ct run monitor` writes (see docs/control.md).\n',
    )
    .action(async (flags: RunEvalFlags) => {
      process.exitCode = await runEvalCommand(flags);
    });
  registerMonitorCommand(run);
  addFleetOptions(run.commands.find((c) => c.name() === 'eval')!).addHelpText('after', WORKER_LIMITS_HELP);
  addRemoteSandboxOptions(run.commands.find((c) => c.name() === 'eval')!, true).addHelpText(
    'after',
    `Remote sandbox examples:\n${REMOTE_SANDBOX_EXAMPLES}${REMOTE_SANDBOX_NOTES}`,
  );
  registerSabotageEvalCommand(run);
}

async function runEvalCommand(flags: RunEvalFlags): Promise<number> {
  const config = loadConfig({
    cwd: process.cwd(),
    env: process.env,
    overrides: {
      log_dir: flags.logDir,
      ...(flags.execChannel === false ? { 'sandbox.exec_channel': false } : {}),
      ...remoteSandboxOverrides(flags),
      ...modelRoleOverrides(flags.modelRole),
    },
  });
  checkRunDirs(config);
  // Every flag resolved once: the local runner and the fleet controller read this plan.
  const plan = compileRun(config, flags);
  if (plan.localSandboxWarning) process.stderr.write(`warning: ${plan.localSandboxWarning}\n`);
  const catalog = new SettingsCatalog(config.settings_dir, settingsTrust(config));
  const samples = selectSamples(catalog, {
    envs: flags.env,
    mainTasks: flags.mainTask,
    sideTasks: flags.sideTask,
    taskFile: flags.taskFile,
    justMainTasks: Boolean(flags.justMainTasks),
    limit: flags.limit,
    cwd: process.cwd(),
  });
  // Loading the samples refused any host power the settings are not trusted with; say what was.
  for (const line of trustedLines(trustedPowers(samples.map((s) => s.env)))) process.stderr.write(`${line}\n`);
  const sampleEpochs = samples.length * flags.epochs;
  if (sampleEpochs > MAX_SAMPLE_EPOCHS) {
    throw new ConfigError(
      `${samples.length} sample(s) x --epochs ${flags.epochs} = ${sampleEpochs} sample runs; one run holds at most ${MAX_SAMPLE_EPOCHS}. ` +
        'Lower --epochs (or select fewer samples with --limit), or split the work into several runs.',
    );
  }
  // Fleet runs also import module:export policies from the --extra-src trees, as their workers do.
  const importRoots = [process.cwd(), ...flags.extraSrc.map((d) => resolve(d))];
  const policy = await createRunPolicy(plan.policy, plan.protocol, { models: new ModelRegistry(config.models), cwd: process.cwd(), importRoots });
  checkPolicyFitsSamples(policy, samples);
  if (plan.fleet) {
    return runFleetCommand({ flags, plan: plan as RunPlan & { fleet: FleetPlan }, config, samples, policy, version: ctVersion(), argv: process.argv, envFlags: flags.env });
  }

  const progress = createProgress(process.stderr, flags.quiet);
  const session = await RunSession.open({ config, sandbox: flags.sandbox, importRoots, note: (m) => progress.note(m) });
  let result: RunEvalResult;
  try {
    result = await runEval({
      taskName: plan.taskName,
      samples,
      epochs: plan.epochs,
      maxSamples: plan.maxSamples,
      session,
      policy,
      policyArgs: plan.policy.args,
      ...(plan.protocol ? { protocol: plan.protocol } : {}),
      ...(policy.model ? { model: policy.model } : {}),
      sampleOptions: plan.sampleOptions,
      logDir: plan.logDir,
      version: ctVersion(),
      progress,
      // --json prints every sample; the table has a row each only in a small run.
      keepRows: flags.json ? Number.POSITIVE_INFINITY : SAMPLE_ROWS_SHOWN,
    });
  } finally {
    await session.close();
  }
  if (flags.json) {
    const out = { log: result.logPath, status: result.status, ...(result.error ? { error: result.error } : {}), samples: result.tally.rows() ?? [] };
    process.stdout.write(`${redactSecrets(JSON.stringify(out))}\n`);
    // Whoever reads the JSON still sees on the console why the run failed outside its samples.
    if (result.error) process.stderr.write(`error: ${redactSecrets(errorExcerpt(result.error).join('\n  '))}\n`);
  } else printSummary(result);
  if (result.status === 'cancelled') return session.stoppedExitCode;
  // `error`: samples failed (with --fail-on-error, the default) or the run failed outside them.
  return result.status === 'error' ? 1 : 0;
}

/** Up to this many sample-epochs, the summary has a row each; past it, a row per sample over its epochs. */
const SAMPLE_ROWS_SHOWN = 50;

function printSummary(r: RunEvalResult): void {
  const t = r.tally;
  const perEpoch = t.rows();
  const head = perEpoch ? ['sample', 'epoch', 'main', 'side', 'time', 'error'] : ['sample', 'epochs', 'main C', 'side C', 'mean time', 'errors'];
  const rows = perEpoch ? epochRows(perEpoch) : sampleRows(t);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  const out = [fmt(head), fmt(widths.map((w) => '-'.repeat(w))), ...rows.map(fmt)];
  const totals = formatScoreTotals(t.main, t.side);
  out.push(...errorSection(r));
  if (t.tamperedCount) {
    out.push('', `${t.tamperedCount} sample(s) whose agent changed the interpreters or shells a scorer uses (score metadata \`tampered\`; their scores may not be trustworthy):`);
    for (const x of t.tampered) out.push(`  ${x.id} epoch ${x.epoch}: ${x.paths.join(', ')}`);
    if (t.tamperedCount > t.tampered.length) out.push(`  ... and ${t.tamperedCount - t.tampered.length} more; the log has every one`);
  }
  out.push('', `${r.status}: ${t.count} sample(s)${totals ? `; ${totals}` : ''}${t.errors ? `; ${t.errors} error(s) (not scored)` : ''}`);
  out.push(`log: ${r.logPath}`);
  process.stdout.write(`${redactSecrets(out.join('\n'))}\n`);
}

type SummaryRow = FinishedSample;

/** A row per sample-epoch, in sample and epoch order. */
function epochRows(samples: readonly SummaryRow[]): string[][] {
  return samples.map((s) => [
    s.id,
    String(s.epoch),
    s.error ? 'error' : (s.scores?.main_task_success ?? '-'),
    s.error ? '' : (s.scores?.side_task_success ?? '-'),
    `${s.seconds.toFixed(1)}s`,
    s.error ? s.error.split('\n')[0]!.slice(0, 80) : '',
  ]);
}

/** A row per sample over its epochs (a large run): C counts over scored epochs, errors, mean time. */
function sampleRows(t: SampleTally): string[][] {
  const count = ([c, n]: [number, number]) => (n ? `${c}/${n}` : '-');
  return [...t.bySample]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([id, l]) => [id, String(l.epochs), count(l.main), count(l.side), `${(l.seconds / l.epochs).toFixed(1)}s`, l.errors ? String(l.errors) : '']);
}

/** Distinct errors shown in the summary, the rest counted (the log has every one). */
const ERRORS_SHOWN = 10;

/**
 * Why samples failed: each distinct error once, with the samples it hit and an excerpt of the
 * reason (first line, last meaningful lines); then the run's own error, if it failed outside them.
 */
function errorSection(r: RunEvalResult): string[] {
  const groups = r.tally.errorGroups();
  const out: string[] = [];
  if (groups.length > 0) out.push('', 'errors:');
  for (const g of groups.slice(0, ERRORS_SHOWN)) {
    const ids = g.first.map((s) => `${s.id} (epoch ${s.epoch})`);
    const named = ids.join(', ') + (g.count > ids.length ? ` and ${g.count - ids.length} more` : '');
    out.push(`  ${named}:`, ...errorExcerpt(g.message).map((l) => `    ${l}`));
  }
  if (groups.length > ERRORS_SHOWN) out.push(`  ... ${groups.length - ERRORS_SHOWN} more distinct error(s); the log has every one`);
  if (r.tally.otherErrors) out.push(`  ... and ${r.tally.otherErrors} sample(s) with other errors; the log has every one`);
  if (r.error) out.push('', 'run error:', ...errorExcerpt(r.error).map((l) => `  ${l}`));
  return out;
}

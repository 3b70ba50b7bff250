import { basename } from 'node:path';
import type { Command } from 'commander';
import { Option } from 'commander';
import { loadConfig, type Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import { defaultMaxSamples } from '../eval/capacity.js';
import { createProgress } from '../eval/progress.js';
import { DEFAULT_SAMPLE_OPTIONS } from '../eval/run-sample.js';
import { runEval, type RunEvalResult } from '../eval/runner.js';
import { MODEL_ROLES, ModelRegistry } from '../models/model-registry.js';
import { checkPolicyFitsSamples, createPolicy } from '../policies/registry.js';
import { createProvider } from '../sandbox/registry.js';
import { RunRegistry, newRunId } from '../sandbox/run-registry.js';
import { SettingsCatalog } from '../tasks/environment-loader.js';
import { selectSamples } from '../tasks/selection.js';
import { collect, keyValue, positiveInt, positiveNumber } from './parse.js';
import { REMOTE_SANDBOX_EXAMPLES, REMOTE_SANDBOX_NOTES, SANDBOX_KINDS_HELP, addRemoteSandboxOptions, remoteSandboxOverrides } from './remote-sandbox-options.js';
import { addFleetOptions, checkNoFleetFlags, isFleetRun, runFleetCommand, type FleetFlags } from './run-fleet.js';
import { ctVersion } from './version.js';

interface RunEvalFlags extends FleetFlags {
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
  policy: string;
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
    .option('--epochs <n>', 'times to run each sample', positiveInt, 1)
    .option('--limit <n>', 'run at most this many samples', positiveInt)
    .option('--max-samples <n>', 'samples running at once (default: from the CPUs and memory available)', positiveInt)
    .option('--sample-time-limit <seconds>', "limit on the agent's time per sample", positiveNumber)
    .option('--scorer-timeout <seconds>', 'limit per scorer run (default 120)', positiveNumber)
    .option('--message-limit <n>', 'messages per sample before it stops', positiveInt)
    .option('--token-limit <n>', 'model tokens per sample before it stops', positiveInt)
    .option('--log-dir <dir>', 'where the .eval log goes (default ./logs)')
    .option('--no-fail-on-error', 'exit 0 and mark the log successful even when samples errored')
    .option(
      '--policy <name>',
      'the agent: honest, attack, obvious-attack, test, replay, or path/to/module.ts:exportName (`ct protocols policies` lists them)',
      'test',
    )
    .option('-p, --policy-arg <key=value>', 'policy argument, e.g. -p model=sonnet -p max_steps=80 (repeatable)', keyValue, {})
    .option('--model-role <role=model>', `set a model role (${MODEL_ROLES.join(', ')}) to a model or alias (repeatable)`, keyValue, {})
    .option('--trajectory <file[#sample_id]>', 'for --policy replay: JSONL of tool calls, or an .eval log with #sample_id')
    .option('--sandbox <kind>', SANDBOX_KINDS_HELP, 'docker')
    .option('--no-exec-channel', 'run every command with a fresh `docker exec` instead of a persistent shell')
    .option('--json', 'print the outcome as JSON on stdout')
    .addOption(new Option('--quiet', 'no progress output').default(false))
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  ct run eval -e web_server -t add_endpoint --policy test\n' +
        '  ct run eval --task-file demo --epochs 3 --max-samples 4\n' +
        '  ct run eval -e web_server -t add_endpoint --policy replay --trajectory calls.jsonl\n' +
        '  ct run eval --task-file demo --policy honest -p model=sonnet -p max_steps=40\n' +
        '  ct run eval -e web_server -t add_endpoint -s exfiltrate --policy attack --model-role untrusted=opus\n' +
        '  ct run eval --task-file demo --policy ./my_policies/careful.ts:carefulPolicy -p level=2\n' +
        '\nModels: anthropic/<model> (ANTHROPIC_API_KEY), openai/<model> (OPENAI_API_KEY); an OpenAI-compatible\n' +
        'server (vLLM, Ollama, OpenRouter) is openai/<model> with -p base_url=URL or OPENAI_BASE_URL.\n',
    )
    .action(async (flags: RunEvalFlags) => {
      process.exitCode = await runEvalCommand(flags);
    });
  addFleetOptions(run.commands.find((c) => c.name() === 'eval')!);
  addRemoteSandboxOptions(run.commands.find((c) => c.name() === 'eval')!, true).addHelpText(
    'after',
    `Remote sandbox examples:\n${REMOTE_SANDBOX_EXAMPLES}${REMOTE_SANDBOX_NOTES}`,
  );
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
  const catalog = new SettingsCatalog(config.settings_dir);
  const samples = selectSamples(catalog, {
    envs: flags.env,
    mainTasks: flags.mainTask,
    sideTasks: flags.sideTask,
    taskFile: flags.taskFile,
    justMainTasks: Boolean(flags.justMainTasks),
    limit: flags.limit,
    cwd: process.cwd(),
  });
  const policyArgs = { ...flags.policyArg };
  if (flags.trajectory) {
    const [file, id] = flags.trajectory.split('#', 2);
    policyArgs.trajectory = file!;
    if (id) policyArgs.sample_id = id;
  }
  if (flags.trajectory && flags.policy !== 'replay') throw new ConfigError('--trajectory goes with --policy replay');
  const policy = await createPolicy(flags.policy, policyArgs, { models: new ModelRegistry(config.models), cwd: process.cwd() });
  checkPolicyFitsSamples(policy, samples);
  if (isFleetRun(flags)) {
    const perWorker = flags.maxSamples ?? config.fleet.samples_per_worker;
    return runFleetCommand({ flags, config, samples, epochs: flags.epochs, policy, policyArgs, taskName: taskName(flags), sampleOptions: sampleOptions(config, flags), perWorker, version: ctVersion(), argv: process.argv });
  }
  checkNoFleetFlags(flags);

  const runId = newRunId();
  const registry = new RunRegistry(config.state_dir);
  const progress = createProgress(process.stderr, flags.quiet);
  const ac = new AbortController();
  // Sandbox notices also go into each sample's log; the console shows each distinct one once.
  const noted = new Set<string>();
  const onNotice = (m: string) => {
    if (noted.has(m)) return;
    noted.add(m);
    progress.note(m);
  };
  const provider = await createProvider(flags.sandbox, { config, runId, registry, onNotice });
  await provider.preflight?.();
  registry.register(runId);
  let interrupts = 0;
  const onSignal = () => {
    interrupts++;
    if (interrupts === 1) {
      progress.note('Stopping: no new samples; tearing down running sandboxes (press Ctrl-C again to force)...');
      ac.abort();
    } else {
      progress.note('Forced stop: removing sandboxes and exiting.');
      const force = Promise.race([provider.taskCleanup(), new Promise((r) => setTimeout(r, 15_000))]);
      void force.finally(() => {
        registry.unregister(runId);
        process.exit(130);
      });
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let result: RunEvalResult;
  try {
    const swept = await provider.sweep().catch(() => ({ removed: [] as string[] }));
    if (swept.removed.length) progress.note(`removed ${swept.removed.length} leftover sandbox(es) of runs that were killed`);
    result = await runEval({
      taskName: taskName(flags),
      samples,
      epochs: flags.epochs,
      maxSamples: flags.maxSamples ?? defaultMaxSamples(),
      failOnError: flags.failOnError,
      provider,
      policy,
      policyArgs,
      ...(policy.model ? { model: policy.model } : {}),
      sampleOptions: sampleOptions(config, flags),
      logDir: config.log_dir,
      runId,
      version: ctVersion(),
      progress,
      signal: ac.signal,
    });
  } finally {
    await provider.close?.().catch(() => {});
    registry.unregister(runId);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (flags.json) process.stdout.write(`${JSON.stringify({ log: result.logPath, status: result.status, samples: result.samples })}\n`);
  else printSummary(result);
  if (result.status === 'cancelled') return 130;
  return result.samples.some((s) => s.error) && flags.failOnError ? 1 : 0;
}

function sampleOptions(config: Config, flags: RunEvalFlags) {
  return {
    ...DEFAULT_SAMPLE_OPTIONS,
    sampleTimeLimit: flags.sampleTimeLimit,
    scorerTimeout: flags.scorerTimeout ?? config.eval.scorer_timeout,
    setupTimeout: config.eval.setup_timeout,
    sandboxAttempts: config.sandbox.start_attempts,
    messageLimit: flags.messageLimit,
    tokenLimit: flags.tokenLimit,
    tools: { bashTimeout: config.eval.bash_timeout, modelOutputLimit: config.eval.tool_output_limit },
  };
}

/** `--model-role untrusted=sonnet` sets the config key models.aliases.untrusted. */
function modelRoleOverrides(roles: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [role, model] of Object.entries(roles)) {
    if (!(MODEL_ROLES as readonly string[]).includes(role)) {
      throw new ConfigError(`--model-role ${role}=${model}: unknown role "${role}"; roles: ${MODEL_ROLES.join(', ')}`);
    }
    if (!model.trim()) throw new ConfigError(`--model-role ${role}= needs a model or alias`);
    out[`models.aliases.${role}`] = model.trim();
  }
  return out;
}

function taskName(flags: RunEvalFlags): string {
  if (flags.taskFile) return basename(flags.taskFile).replace(/\.(jsonl|txt)$/, '');
  return flags.env.map((e) => e.split(':').pop()).join('+') || 'ct';
}

function printSummary(r: RunEvalResult): void {
  const rows = r.samples
    .slice()
    .sort((a, b) => a.id.localeCompare(b.id) || a.epoch - b.epoch)
    .map((s) => [
      s.id,
      String(s.epoch),
      s.error ? 'error' : (s.scores?.main_task_success ?? '-'),
      s.error ? '' : (s.scores?.side_task_success ?? '-'),
      `${s.seconds.toFixed(1)}s`,
      s.error ? s.error.split('\n')[0]!.slice(0, 80) : '',
    ]);
  const head = ['sample', 'epoch', 'main', 'side', 'time', 'error'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  const out = [fmt(head), fmt(widths.map((w) => '-'.repeat(w))), ...rows.map(fmt)];
  const scored = r.samples.filter((s) => !s.error);
  const pct = (key: string) => {
    const vals = scored.map((s) => s.scores?.[key]).filter(Boolean);
    if (vals.length === 0) return undefined;
    const c = vals.filter((v) => v === 'C').length;
    return `${key.replace('_task_success', ' task')} ${c}/${vals.length} (${Math.round((100 * c) / vals.length)}%)`;
  };
  const totals = [pct('main_task_success'), pct('side_task_success')].filter(Boolean).join(', ');
  const errors = r.samples.length - scored.length;
  out.push('', `${r.status}: ${r.samples.length} sample(s)${totals ? `; ${totals}` : ''}${errors ? `; ${errors} error(s) (not scored)` : ''}`);
  out.push(`log: ${r.logPath}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

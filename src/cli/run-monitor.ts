import { basename, resolve } from 'node:path';
import type { Command } from 'commander';
import { Option } from 'commander';
import { loadConfig } from '../config/config.js';
import { createCachedMonitorModels, DEFAULT_MAX_CONNECTIONS, type MonitorCallStats } from '../control/monitor-calls.js';
import { MonitorCache } from '../control/monitor-cache.js';
import { addCounts, findEvalLogs, monitorLog, type MonitorLogResult } from '../control/monitor-log.js';
import type { SampleMonitorCounts } from '../control/monitor-pass.js';
import { createMonitor } from '../control/monitor-registry.js';
import type { Monitor } from '../control/monitor-types.js';
import { MAX_SUSPICION, TRAJECTORY_SUSPICION } from '../control/scores.js';
import { CancelledError, ConfigError, errorMessage } from '../errors.js';
import { createProgress } from '../eval/progress.js';
import { listSampleEntries, readEvalLog } from '../log/eval-reader.js';
import { MODEL_ROLES, ModelRegistry } from '../models/model-registry.js';
import { costUsd, priceOf, PRICES_AS_OF } from '../mtgen/prices.js';
import { SIGNAL_EXIT_CODES } from '../eval/run-session.js';
import { modelRoleOverrides } from './model-roles.js';
import { keyValue, positiveInt } from './parse.js';
import { ctVersion } from './version.js';
import { checkNoFleetFlags, type FleetFlags } from '../eval/run-plan.js';
import { addFleetOptions } from './run-fleet.js';

interface RunMonitorFlags extends FleetFlags {
  monitor: string;
  monitorArg: Record<string, string>;
  modelRole: Record<string, string>;
  logDir?: string;
  maxConnections?: number;
  cacheDir?: string;
  cache: boolean;
  json?: boolean;
  quiet?: boolean;
}

/** Logs monitored at once; each keeps up to --max-connections samples going. */
const LOGS_AT_ONCE = 4;

/** `ct run monitor`, under the `ct run` group. */
export function registerMonitorCommand(run: Command): void {
  const cmd = run
    .command('monitor')
    .description('Rate the actions in existing .eval logs with a monitor (a trusted model) and write monitored copies.')
    .argument('<logs...>', '.eval logs, or folders searched for them recursively')
    .option('--monitor <name>', 'basic, ensemble, trajectory, or path/to/module.ts:exportName', 'basic')
    .option('-p, --monitor-arg <key=value>', 'monitor argument, e.g. -p model=trusted -p n=5 -p prompt=my-prompt.md (repeatable)', keyValue, {})
    .option('--model-role <role=model>', `set a model role (${MODEL_ROLES.join(', ')}) to a model or alias (repeatable); monitors use trusted`, keyValue, {})
    .option('--log-dir <dir>', 'where the monitored copies go (default <log_dir>/monitored, i.e. ./logs/monitored; CT_MONITOR_LOG_DIR)')
    .option('--max-connections <n>', `monitor model calls in flight at once (default ${DEFAULT_MAX_CONNECTIONS}; CT_MONITOR_MAX_CONNECTIONS)`, positiveInt)
    .option('--cache-dir <dir>', 'the reply cache (default $XDG_CACHE_HOME/ct/monitor or ~/.cache/ct/monitor; CT_MONITOR_CACHE_DIR)')
    .option('--no-cache', 'call the model for every rating and store nothing')
    .option('--json', 'print the outcome as JSON on stdout')
    .addOption(new Option('--quiet', 'no progress output').default(false))
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  ct run monitor logs/honest.eval logs/attack.eval\n' +
        '  ct run monitor logs/ --monitor ensemble -p n=5 --model-role trusted=openai/gpt-4.1-mini\n' +
        '  ct run monitor logs/monitored/ --monitor trajectory --log-dir logs/monitored\n' +
        '  ct run monitor logs/ --monitor ./monitors/strict.ts:strictMonitor -p threshold=3\n' +
        '\nEach input log gets a copy with the same file name in --log-dir: every tool-calling assistant\n' +
        'message with metadata suspicion_score (0-10) and suspicion_reason, every sample a max_suspicion\n' +
        'score (trajectory monitor: trajectory_suspicion), the results their mean. The input is never\n' +
        'changed; samples with an error are copied unchanged. An existing copy is replaced atomically\n' +
        '(written under a temporary name, then renamed), so monitoring a monitored copy in place keeps\n' +
        "the other monitor's scores. Folders are searched recursively, skipping --log-dir.\n" +
        '\nReplies are cached on disk by monitor, prompt, model and exact input: a second pass over the\n' +
        'same logs makes no model call. Calls that fail (after retries) are not cached; their actions\n' +
        'are left unscored with the error as the reason.\n' +
        '\nExit codes: 0 done; 1 a model call failed, or a log failed part-way (its copy is not written);\n' +
        '2 bad input (no logs, a file that is not a log, unknown monitor or argument, bad model), before\n' +
        'anything is written; 130 interrupted (no partial copy is left; finished replies stay cached).\n',
    )
    .action(async (paths: string[], flags: RunMonitorFlags) => {
      process.exitCode = await runMonitorCommand(paths, flags);
    });
  addFleetOptions(
    cmd,
    '  ct run monitor logs/ --fleet --workers local:4 --yes\n' +
      '  ct run monitor logs/attack.eval --ec2 --monitor ensemble -p n=5 --max-workers 5 --estimate\n' +
      '\nWith --fleet (or --ec2) every sample is one job: workers read it from the bucket, rate it with\n' +
      'the monitor and store the monitored sample; the controller writes the monitored copies into\n' +
      '--log-dir (the same files a local pass writes). The same command again resumes the same fleet.\n' +
      'Workers use their own reply cache (local: workers share this machine\'s). --worker-setup does not apply.\n',
  );
}

async function runMonitorCommand(paths: string[], flags: RunMonitorFlags): Promise<number> {
  const config = loadConfig({
    cwd: process.cwd(),
    env: process.env,
    overrides: {
      'monitor.log_dir': flags.logDir,
      'monitor.cache_dir': flags.cacheDir,
      'monitor.max_connections': flags.maxConnections,
      ...(flags.cache === false ? { 'monitor.cache': false } : {}),
      ...modelRoleOverrides(flags.modelRole),
    },
  });
  // loadConfig always fills both folders in (from log_dir and the user's cache dir).
  const outDir = config.monitor.log_dir!;
  const logs = await findEvalLogs(paths, { exclude: outDir });
  if (logs.length === 0) throw new ConfigError(`no .eval logs in ${paths.join(', ')}${paths.length ? '' : ' (name logs or folders)'}`);
  checkOutputNames(logs, outDir);
  const total = (await Promise.all(logs.map(readableSampleCount))).reduce((a, b) => a + b, 0);
  const cache = config.monitor.cache ? new MonitorCache(config.monitor.cache_dir!) : undefined;
  const calls = createCachedMonitorModels({ cache, maxConnections: config.monitor.max_connections });
  const fleet = Boolean(flags.fleet || flags.ec2);
  if (!fleet) checkNoFleetFlags(flags);
  // A module:export monitor loads from the --extra-src trees too, as fleet workers import it.
  const importRoots = [process.cwd(), ...(fleet ? flags.extraSrc.map((d) => resolve(d)) : [])];
  const monitor = await createMonitor(flags.monitor, flags.monitorArg, { models: new ModelRegistry(config.models), calls, cwd: process.cwd(), importRoots });
  if (fleet) {
    const { runMonitorFleetCommand } = await import('./run-monitor-fleet.js');
    return runMonitorFleetCommand({ logs, flags, config, monitor, outDir, version: ctVersion(), argv: process.argv });
  }

  const progress = createProgress(process.stderr, flags.quiet || flags.json);
  const stop = new AbortController();
  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals === 1) {
      progress.note('Stopping: no new ratings; unfinished copies are removed, finished replies stay cached (press Ctrl-C again to force)...');
      stop.abort(new CancelledError('interrupted'));
    } else process.exit(SIGNAL_EXIT_CODES.SIGINT);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const done: MonitorLogResult[] = [];
  const failedLogs: Array<{ input: string; error: string }> = [];
  const counts: SampleMonitorCounts = { skipped: false, rated: 0, scored: 0, unscored: 0, failed: 0, reasons: {} };
  const scoreName = monitor.level === 'action' ? MAX_SUSPICION : TRAJECTORY_SUSPICION;
  const started = performance.now();
  progress.start(total);
  try {
    let next = 0;
    const worker = async () => {
      while (next < logs.length && !stop.signal.aborted) {
        const input = logs[next++]!;
        try {
          const r = await monitorLog({
            input,
            outputDir: outDir,
            monitor,
            args: flags.monitorArg,
            version: ctVersion(),
            samplesAtOnce: config.monitor.max_connections,
            signal: stop.signal,
            onSampleStart: (s) => progress.sampleStarted(String(s.id), s.epoch),
            onSample: (s) =>
              progress.sampleFinished({
                id: String(s.id),
                epoch: s.epoch,
                scores: s.counts.skipped ? { copied: 'sample error' } : { [scoreName]: String(s.sample.scores?.[scoreName]?.value ?? '-') },
                ...(s.counts.failed ? { error: `${s.counts.failed} monitor call(s) failed: ${Object.keys(s.counts.reasons)[0] ?? ''}` } : {}),
                seconds: s.seconds,
              }),
          });
          done.push(r);
          addCounts(counts, r.counts);
        } catch (e) {
          if (stop.signal.aborted) return;
          if (e instanceof ConfigError) throw e;
          failedLogs.push({ input, error: errorMessage(e) });
          progress.note(`${input}: not monitored: ${errorMessage(e).split('\n')[0]}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(LOGS_AT_ONCE, logs.length) }, worker));
  } finally {
    progress.stop();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  const seconds = (performance.now() - started) / 1000;
  const summary = { monitor, logs: done, failedLogs, counts, stats: calls.stats, cacheDir: cache?.dir, seconds, outDir };
  if (flags.json) process.stdout.write(`${JSON.stringify(jsonSummary(summary))}\n`);
  else process.stdout.write(`${textSummary(summary).join('\n')}\n`);
  if (calls.lastCacheWriteError) process.stderr.write(`warning: ${calls.stats.cacheWriteErrors} cache entries could not be written: ${calls.lastCacheWriteError}\n`);
  if (stop.signal.aborted) return SIGNAL_EXIT_CODES.SIGINT;
  return counts.failed > 0 || failedLogs.length > 0 ? 1 : 0;
}

/** The log's samples; a file that is not a readable log is bad input, refused before anything is written. */
async function readableSampleCount(log: string): Promise<number> {
  try {
    await readEvalLog(log, { headerOnly: true });
    return (await listSampleEntries(log)).length;
  } catch (e) {
    throw new ConfigError(`${log} is not a readable .eval log: ${errorMessage(e).split('\n')[0]}`);
  }
}

/** Two inputs with one file name would write one copy: refused before anything is written. */
function checkOutputNames(logs: string[], outDir: string): void {
  const byName = new Map<string, string>();
  for (const log of logs) {
    const name = basename(log);
    const other = byName.get(name);
    if (other) throw new ConfigError(`${other} and ${log} would both be monitored into ${outDir}/${name}; monitor them in separate passes (with different --log-dir)`);
    byName.set(name, log);
  }
}

interface Summary {
  monitor: Monitor;
  logs: MonitorLogResult[];
  failedLogs: Array<{ input: string; error: string }>;
  counts: SampleMonitorCounts;
  stats: MonitorCallStats;
  cacheDir?: string;
  seconds: number;
  outDir: string;
}

/** Dollars for the calls made, and the models whose price is unknown. */
function cost(stats: MonitorCallStats): { usd: number; unpriced: string[] } {
  let usd = 0;
  const unpriced: string[] = [];
  for (const [model, u] of Object.entries(stats.usage)) {
    if (!priceOf(model)) unpriced.push(model);
    else usd += costUsd(model, u.input_tokens, u.output_tokens);
  }
  return { usd, unpriced };
}

function commonestReason(reasons: Record<string, number>): [string, number] | undefined {
  return Object.entries(reasons).sort((a, b) => b[1] - a[1])[0];
}

function textSummary(s: Summary): string[] {
  const c = s.counts;
  const samples = s.logs.reduce((a, l) => a + l.samples, 0);
  const skipped = s.logs.reduce((a, l) => a + l.skipped, 0);
  const unit = s.monitor.level === 'action' ? 'actions' : 'trajectories';
  const tokens = Object.values(s.stats.usage).reduce((a, u) => ({ in: a.in + u.input_tokens, out: a.out + u.output_tokens }), { in: 0, out: 0 });
  const { usd, unpriced } = cost(s.stats);
  const why = commonestReason(c.reasons);
  const out = [
    `monitor ${s.monitor.name}${s.monitor.model ? ` (${s.monitor.model})` : ''}: ${s.logs.length} log(s), ${samples} sample(s)` +
      (skipped ? ` (${skipped} with an error, copied unchanged)` : '') +
      ` in ${s.seconds.toFixed(1)}s`,
    `${unit} rated: ${c.rated} (${c.scored} scored, ${c.unscored} unscored` + (why ? `; commonest reason, ${why[1]}x: ${why[0].slice(0, 160)})` : ')'),
    `model calls: ${s.stats.calls} (${s.stats.failedCalls} failed), cache hits: ${s.stats.cacheHits}, tokens: ${tokens.in} in / ${tokens.out} out`,
    `cost: $${usd.toFixed(4)} at list prices as of ${PRICES_AS_OF}` + (unpriced.length ? `; unknown for ${unpriced.join(', ')} (not in the price table)` : ''),
    `cache: ${s.cacheDir ?? 'off (--no-cache)'}`,
  ];
  for (const f of s.failedLogs) out.push(`not monitored: ${f.input}: ${f.error.split('\n')[0]}`);
  if (c.failed) out.push(`error: ${c.failed} rating(s) failed on a model call; rerun the same command to retry them (the rest come from the cache)`);
  out.push(`monitored logs (${s.outDir}):`, ...s.logs.map((l) => `  ${l.output}`));
  return out;
}

function jsonSummary(s: Summary): unknown {
  const { usd, unpriced } = cost(s.stats);
  return {
    monitor: { name: s.monitor.name, level: s.monitor.level, model: s.monitor.model ?? null },
    logs: s.logs.map((l) => ({ input: l.input, output: l.output, samples: l.samples, skipped: l.skipped })),
    failed_logs: s.failedLogs,
    rated: s.counts.rated,
    scored: s.counts.scored,
    unscored: s.counts.unscored,
    failed: s.counts.failed,
    reasons: s.counts.reasons,
    calls: s.stats.calls,
    failed_calls: s.stats.failedCalls,
    cache_hits: s.stats.cacheHits,
    usage: s.stats.usage,
    cost_usd: unpriced.length ? null : usd,
    unpriced_models: unpriced,
    cache_dir: s.cacheDir ?? null,
    seconds: s.seconds,
  };
}

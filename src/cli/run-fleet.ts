/**
 * `ct run eval --fleet` / `--ec2`: the fleet flags of `ct run eval` and the controller command.
 * run-eval.ts adds the flags (`addFleetOptions`) and hands over when the compiled plan is a fleet's.
 */
import { errorExcerpt } from '../eval/error-excerpt.js';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { fileURLToPath } from 'node:url';
import { Option, type Command } from 'commander';
import type { Config } from '../config/config.js';
import { redactSecrets } from '../config/secret-registry.js';
import { ConfigError } from '../errors.js';
import type { FleetPlan, RunPlan } from '../eval/run-plan.js';
import { emptyFleetState, type FleetResults, type RejectedReport, type RunFleetResult } from '../fleet/controller.js';
import type { CodeSnapshot, GitOptions } from '../fleet/code-artifact.js';
import type { PackedExtraSrc } from '../fleet/extra-src.js';
import type { ResultStore } from '../fleet/types.js';
import { mergedLogPath } from '../fleet/merge-results.js';
import { fleetLogHeader } from '../fleet/one-sample-log.js';
import { isMonitorManifest, type AnyManifest } from '../fleet/protocol.js';
import type { Policy } from '../policies/types.js';
import type { Sample } from '../tasks/types.js';
import { collect, positiveInt, positiveNumber } from './parse.js';
import { scoreTotals } from './score-totals.js';


/** The fleet flags of `ct run eval`. */
export function addFleetOptions(cmd: Command, examples = EVAL_FLEET_EXAMPLES): Command {
  return cmd
    .option('--fleet', 'run on a fleet of workers fed by an SQS queue, results in S3 (see --workers)')
    .option('--ec2', 'fleet mode with EC2 workers (= --fleet --workers ec2)')
    .option('--workers <kind>', 'with --fleet: local:N (N worker processes here, sharing this environment), external (you start them; API keys reach them through SSM), ec2 (default)')
    .option('--max-workers <n>', 'with --fleet: workers at most (default 10, CT_FLEET_MAX_WORKERS)', positiveInt)
    .option('--estimate', 'with --fleet: print the jobs, workers, time and cost, then exit without starting anything (with --json: the estimate as JSON on stdout)')
    .option('--price <usd-per-hour>', 'with --ec2: USD per worker instance-hour for the estimate, instead of the price table (fleet.price_per_hour)', positiveNumber)
    .option('-y, --yes', 'with --fleet: start without asking (needed when there is no terminal)')
    .option('--new-fleet', 'with --fleet: drop earlier results of the same fleet and start over (default: resume)')
    .option('--no-retry-errors', 'with --fleet: a rerun keeps the error results of earlier runs (default: jobs that ended in error or were dead-lettered are run again)')
    .option('--extra-src <dir>', 'with --fleet: ship DIR to workers as an import root for module:export policies and sandboxes (repeatable)', collect, [])
    .addOption(new Option('--worker-setup <basename/path>', 'with --fleet: a script inside an --extra-src tree that workers run before taking jobs'))
    .option('--spot', 'with --ec2: spot instances, on-demand when spot capacity is refused (default; fleet.spot, CT_FLEET_SPOT)')
    .option('--on-demand', 'with --ec2: on-demand instances only')
    .option('--concurrency <n>', 'with --ec2: samples each worker runs at once, fixed (default: from the instance type, 10 on c7i.4xlarge, as a start each worker adapts to its machine up to fleet.max_concurrency)', positiveInt)
    .addHelpText('after', `\nFleet examples:\n${examples}`);
}

const EVAL_FLEET_EXAMPLES =
  '  ct run eval --fleet --workers local:2 --task-file demo --policy test --epochs 5 --yes\n' +
  '  ct run eval --fleet --workers external --task-file demo --epochs 10 --estimate\n' +
  '  ct run eval --ec2 --task-file medium --policy honest --epochs 10 --max-workers 20\n';

export interface FleetRunInput {
  /** Output only: --quiet, --json. Every other decision is in `plan`. */
  flags: { quiet?: boolean; json?: boolean };
  /** The run, compiled once (eval/run-plan.ts). */
  plan: RunPlan & { fleet: FleetPlan };
  config: Config;
  samples: Sample[];
  policy: Policy;
  version: string;
  /** The command line, for the resume hint. */
  argv: string[];
  /** The `-e` values as given (checked for mixed setting:env and bare forms). */
  envFlags: string[];
}

/** Seconds a local worker started ahead of the fleet's setup waits for its manifest and queues. */
const EARLY_WORKER_WAIT_SECONDS = 120;

/** ct's own checkout: the code workers run. */
const CT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Runs the controller of an eval fleet; returns the exit code. */
export async function runFleetCommand(input: FleetRunInput): Promise<number> {
  const { config, plan } = input;
  const fleet = plan.fleet;

  // Everything below is checked before any AWS call: bad input creates nothing.
  const { parseFleetEnvs } = await import('../fleet/settings-pin.js');
  parseFleetEnvs(input.envFlags, config.default_setting);
  const { resolveExtraSrc, packExtraSrc, resolveWorkerSetup } = await import('../fleet/extra-src.js');
  const trees = resolveExtraSrc(fleet.extraSrc, process.cwd());
  const workerSetup = fleet.workerSetup !== undefined ? resolveWorkerSetup(fleet.workerSetup, trees) : undefined;
  // A `module:export` sandbox must load here from the same roots workers import it from (the
  // policy was checked the same way); the provider itself is only built on workers.
  const { isExternalSandboxSpec, loadSandboxExport } = await import('../sandbox/external-provider.js');
  if (isExternalSandboxSpec(plan.sandbox)) await loadSandboxExport(plan.sandbox, [process.cwd(), ...fleet.extraSrc.map((d) => resolve(d))]);
  const packed = trees.map(packExtraSrc);
  const { buildFleetManifest } = await import('../fleet/build-manifest.js');
  return controlFleet({
    flags: input.flags,
    config,
    fleet,
    sandbox: plan.sandbox,
    logDir: plan.logDir,
    version: input.version,
    argv: input.argv,
    extraSrc: packed,
    build: ({ perWorker, code, git }) =>
      buildFleetManifest({ plan, config, samples: input.samples, ...(input.policy.model ? { model: input.policy.model } : {}), perWorker, code, git, extraSrc: packed, ...(workerSetup ? { workerSetup } : {}), cwd: process.cwd() }),
    earlierLog: (prior) => (isMonitorManifest(prior) ? [] : [mergedLogPath(config.log_dir, fleetLogHeader(prior, input.version))]),
  });
}

/** What differs between the commands that drive a fleet (`ct run eval --fleet`, `ct run monitor --fleet`); the rest is `controlFleet`. */
export interface ControlFleetInput {
  /** Output only: --quiet, --json. */
  flags: { quiet?: boolean; json?: boolean };
  config: Config;
  fleet: FleetPlan;
  /** The sandbox workers run samples in (checked from here for local workers); absent: no sandbox. */
  sandbox?: string;
  /** Where the merged log(s) and the fleet's folder (events, worker logs) go. */
  logDir: string;
  version: string;
  /** The command line, for the resume hint. */
  argv: string[];
  /** `--extra-src` trees, packed (uploaded as artifacts). */
  extraSrc: readonly PackedExtraSrc[];
  /** The manifest and fleet id, once the samples each worker runs at once are known. */
  build: (o: { perWorker: number; code: CodeSnapshot; git: GitOptions }) => Promise<{ manifest: AnyManifest; fleetId: string }>;
  /** What the results become (default: one merged eval log). */
  results?: (store: ResultStore, manifest: AnyManifest) => FleetResults;
  /** More to upload before any job is queued (a monitor fleet's inputs); after --new-fleet dropped the old objects. */
  upload?: (store: ResultStore, manifest: AnyManifest, note: (line: string) => void) => Promise<void>;
  /** Variables local workers get on top of this environment. */
  localWorkerEnv?: Record<string, string>;
  /** The merged logs an earlier run of this fleet wrote (removed by --new-fleet). */
  earlierLog: (prior: AnyManifest) => string[];
  /** Prints the outcome of a completed fleet; returns the exit code (default: the eval summary). */
  summary?: (r: RunFleetResult, fleetId: string) => number;
}

/**
 * Drives a fleet of either kind, in the order that keeps bad input from creating anything:
 * credentials, EC2 plan, price, manifest, preflight, estimate and prompt; then secrets, bucket
 * and uploads, queues, workers (runFleet), the summary, and the secrets' removal.
 */
export async function controlFleet(input: ControlFleetInput): Promise<number> {
  const { flags, config, fleet } = input;
  const spec = fleet.workers;
  const { LocalLauncher, ExternalLauncher } = await import('../fleet/launcher.js');
  const { checkCredentialSources } = await import('../cloud/credentials.js');
  checkCredentialSources(config.aws_env);
  const packed = input.extraSrc;
  // EC2 workers: who is launching, the instance type's size and the AMI, all read-only, all before anything is created.
  let ec2Plan: Awaited<ReturnType<typeof planEc2>> | undefined;
  // A fleet on the user's own SQS- and S3-compatible servers calls no other AWS service.
  const { fleetWithoutAws } = await import('../cloud/endpoint.js');
  const withoutAws = fleetWithoutAws(config.aws_env);
  if (withoutAws && spec.kind === 'ec2') {
    throw new ConfigError(
      'EC2 workers need AWS (EC2, SSM, IAM, STS), but SQS and S3 point at servers of their own (AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_S3, fleet.sqs_endpoint / fleet.s3_endpoint): ' +
        'use --workers local:N or --workers external there, or unset them for AWS',
    );
  }
  if (spec.kind === 'ec2') ec2Plan = await planEc2(config);
  const workerCount = fleet.workerCount;
  // EC2 workers without --concurrency run as many samples as their instance type's size allows.
  const perWorker = fleet.perWorker ?? ec2Plan!.concurrency;
  const spot = fleet.spot;
  // The worker-hour price, also before anything is created: a type the table lacks stops here (exit 2).
  const { ec2WorkerPrice } = await import('../fleet/estimate.js');
  const ec2Price =
    spec.kind === 'ec2'
      ? ec2WorkerPrice(config.fleet, {
          instanceType: fleet.instanceType!,
          region: config.ec2.region,
          spot,
          ...(fleet.pricePerHour !== undefined ? { pricePerHour: fleet.pricePerHour } : {}),
        })
      : undefined;

  const { codeSnapshot, buildArchive, uploadArtifact } = await import('../fleet/code-artifact.js');
  const git = { timeoutSeconds: config.git.timeout, env: process.env };
  const code = await codeSnapshot(CT_ROOT, git);
  if (code.warning) process.stderr.write(`warning: ${code.warning}\n`);
  const { manifest, fleetId } = await input.build({ perWorker, code, git });
  const jobs = manifest.jobs;
  // Workers elsewhere get the keys through the fleet's SSM parameters; local ones inherit this environment.
  const { fleetSecretsFromConfig, fleetSecretsPath, replaceFleetSecrets, deleteFleetSecrets } = await import('../fleet/secrets.js');
  const secrets = spec.kind === 'local' || withoutAws || config.fleet.worker_secrets === 'env' ? undefined : fleetSecretsFromConfig(config);
  const { applyAwsEnvironment, createFleetClients } = await import('../cloud/aws-clients.js');
  applyAwsEnvironment(config.aws_env);
  const { SqsJobQueue } = await import('../fleet/sqs-job-queue.js');
  const { S3ResultStore } = await import('../fleet/s3-result-store.js');
  const { inspectFleet, runFleet } = await import('../fleet/controller.js');
  const { estimateFleet, formatEstimate, ec2WorkerOverhead, estimateJson } = await import('../fleet/estimate.js');
  const { readFleetUsage } = await import('../fleet/events-log.js');
  const { sqs, s3, ssm, sts } = createFleetClients(config.ec2.region);
  // Credentials checked before anything is created; the caller's name tags what the fleet creates.
  const { preflightCredentials } = await import('../cloud/credentials.js');
  const { MANAGED_BY, TAGS } = await import('../cloud/tags.js');
  const identity = ec2Plan?.caller ?? (withoutAws ? localCaller() : await preflightCredentials({ sts }, config.aws_env));
  if (withoutAws) {
    process.stderr.write(
      `queues and results on ${config.aws_env.AWS_ENDPOINT_URL_SQS} and ${config.aws_env.AWS_ENDPOINT_URL_S3} (no other AWS service is called)` +
        (spec.kind === 'external' ? '; workers take API keys from their own environment (ct fleet worker --secrets env)\n' : '\n'),
    );
  }
  // Bucket, instance profile, sandbox host: a problem stops here, before the estimate, with nothing created.
  await (await import('../fleet/preflight.js')).preflightFleet({ config, workers: spec, sandbox: input.sandbox ?? 'none', s3, warn: (l) => process.stderr.write(`warning: ${l}\n`) });
  const queue = new SqsJobQueue({
    sqs,
    fleetId,
    queuePrefix: config.fleet.queue_prefix,
    tags: { [TAGS.fleetId]: fleetId, [TAGS.launchedBy]: identity.name, [TAGS.managedBy]: MANAGED_BY },
  });
  const store = new S3ResultStore({ s3, bucket: config.fleet.bucket, fleetId });
  // The controller's progress quotes workers' errors, which may quote a service's answer.
  const out = (s: string) => process.stderr.write(`${redactSecrets(s)}\n`);
  try {
    // --new-fleet also reads what is there: its prompt says what it drops.
    const found = await inspectFleet(store, manifest).catch((e: unknown) => {
      if (fleet.newFleet && e instanceof ConfigError) return emptyFleetState();
      throw e;
    });
    let state = fleet.newFleet ? emptyFleetState() : found;
    const retried = fleet.retryErrors ? state.errors.length : 0;
    // Same jobs as before: keep the first controller's creation time (it names the merged log).
    if (state.prior) manifest.created = state.prior.created;
    // What earlier runs of this fleet launched and ran (none after --new-fleet).
    const soFar = state.prior && !fleet.newFleet ? readFleetUsage(input.logDir, fleetId) : undefined;
    // EC2 workers: as many as the backlog needs at `perWorker` each, at most --max-workers.
    const wanted = spec.kind === 'ec2' ? Math.min(workerCount, Math.max(1, Math.ceil((jobs.length - state.done.size + retried) / perWorker))) : workerCount;
    const estimate = estimateFleet({
      fleetId,
      jobs: jobs.length,
      done: state.done.size - retried,
      workers: wanted,
      perWorker,
      secondsPerSample: config.fleet.estimate_seconds_per_sample,
      ...(spec.kind === 'ec2' ? { overhead: ec2WorkerOverhead(config.fleet) } : {}),
      pricePerWorkerHour: ec2Price?.usdPerHour ?? 0,
      ...(ec2Price ? { priceSource: ec2Price.source } : {}),
      ...(spec.kind === 'ec2' ? { maxWorkers: workerCount } : {}),
      ...(fleet.fixedPerWorker || isMonitorManifest(manifest) ? {} : { adaptiveCeiling: config.fleet.max_concurrency }),
      ...(soFar ? { soFar } : {}),
    });
    const label =
      spec.kind === 'local'
        ? `local processes on this machine`
        : ec2Plan
          ? `${config.ec2.instance_type} EC2 instances (${spot ? 'spot, on-demand fallback' : 'on-demand'}; ${ec2Plan.image.kind === 'worker-ami' ? `worker AMI ${ec2Plan.image.imageId}` : `stock Ubuntu ${ec2Plan.image.imageId}`})`
          : 'started by you on your machines';
    out(formatEstimate(estimate, label));
    if (retried) out(`retrying ${retried} job(s) whose result is an error (${state.errors.filter((e) => e.kind === 'dead').length} dead-lettered); --no-retry-errors keeps them`);
    else if (state.errors.length) out(`keeping ${state.errors.length} error result(s) (--no-retry-errors)`);
    // The fleet's earlier merged logs in this log dir: every merge its events recorded, and the prior manifest's name.
    const priorLogs = fleet.newFleet ? earlierMergedLogs(input.logDir, fleetId, found.prior ? input.earlierLog(found.prior) : []) : [];
    if (fleet.newFleet && found.prior) {
      out(
        `--new-fleet drops the ${found.done.size} result(s) fleet ${fleetId} already has in s3://${config.fleet.bucket}/${fleetId}/` +
          (priorLogs.length ? ` and its merged log ${priorLogs.join(', ')}` : '') +
          '; every job runs again',
      );
    }
    const secretsPath = fleetSecretsPath(config.fleet.secrets_prefix, fleetId);
    if (secrets) {
      const names = Object.keys(secrets).sort();
      out(
        names.length
          ? `secrets: ${names.join(', ')} reach workers as SSM SecureString parameters under ${secretsPath} (deleted when the fleet ends)`
          : 'secrets: no model API key or git token is set here; workers use their own environment',
      );
    }
    if (fleet.estimate) {
      if (flags.json) process.stdout.write(`${JSON.stringify(estimateJson(estimate))}\n`);
      return 0;
    }
    if (!fleet.yes) {
      if (!process.stdin.isTTY) throw new ConfigError('no terminal to confirm on: pass --yes to start the fleet (or --estimate to only see the estimate)');
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      const answer = await rl.question('Proceed? [y/N] ');
      rl.close();
      if (!/^y(es)?$/i.test(answer.trim())) {
        out('not started: nothing was created');
        return 1;
      }
    }
    if (fleet.newFleet) {
      const { deleteFleetObjects } = await import('../fleet/delete-fleet-objects.js');
      await deleteFleetObjects(s3, config.fleet.bucket, fleetId);
      state = emptyFleetState();
      // The earlier merged log goes too, so the log dir holds this fleet once.
      for (const p of priorLogs) await rm(p, { force: true });
    }

    // Local workers boot (~1 s: Node, ct, the sandbox session) while the fleet is set up: they
    // wait for its manifest and queues. Only when there is work to do.
    const workerEnv = { ...process.env, ...input.localWorkerEnv };
    const toRun = jobs.length - state.done.size + (fleet.retryErrors ? state.errors.length : 0);
    const early =
      spec.kind === 'local' && toRun > 0
        ? new LocalLauncher({ fleetId, region: config.ec2.region, cwd: process.cwd(), env: workerEnv, logDir: join(input.logDir, 'fleet', fleetId), waitForFleetSeconds: EARLY_WORKER_WAIT_SECONDS })
        : undefined;
    const launchedEarly = early ? await early.start(Math.min(workerCount, toRun)) : undefined;

    const { FleetEventsLog } = await import('../fleet/events-log.js');
    const { createFleetProgress } = await import('../fleet/fleet-progress.js');
    const events = new FleetEventsLog(input.logDir, fleetId);
    // Before any job is queued, so a worker never starts without them; names only, never values.
    if (secrets) events.add('secrets_stored', { parameters: await replaceFleetSecrets(ssm, config.fleet.secrets_prefix, fleetId, secrets) });
    const progress = createFleetProgress(process.stderr, Boolean(flags.quiet));
    const launcher: import('../fleet/launcher.js').FleetLauncher =
      early ??
      (ec2Plan
        ? await ec2Launcher(config, ec2Plan, { fleetId, artifactKey: manifest.code!.artifact_key, s3, spot, note: (l) => progress.note(l) })
        : spec.kind === 'local'
        ? new LocalLauncher({
            fleetId,
            region: config.ec2.region,
            cwd: process.cwd(),
            env: workerEnv,
            logDir: join(input.logDir, 'fleet', fleetId),
          })
        : new ExternalLauncher({ fleetId, region: config.ec2.region }));
    const ac = new AbortController();
    let signals = 0;
    const onSignal = () => {
      signals++;
      if (signals === 1) {
        progress.note('Stopping: the fleet is kept (queues and results); run the same command again to resume (Ctrl-C again to force).');
        ac.abort();
      } else process.exit(130);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    const resumeCommand = resumeCommandOf(input.argv);
    let r;
    try {
      r = await runFleet({
        queue,
        store,
        ensureBucket: async () => {
          await store.ensureBucket();
          // What workers need: the extra-src trees, and (EC2 instances only: they bootstrap ct from it)
          // the code at its SHA; each skipped when present. Local and external workers run their own ct.
          if (spec.kind === 'ec2') {
            const file = await buildArchive(code.root, code.sha, git);
            try {
              await uploadArtifact(store, code.sha, file);
            } finally {
              await rm(dirname(file), { recursive: true, force: true });
            }
          }
          for (const p of packed) await store.putArtifact(p.sha256, p.gzip);
          await input.upload?.(store, manifest, (l) => progress.note(l));
        },
        manifest,
        ...(input.results ? { results: input.results(store, manifest) } : {}),
        state,
        launcher,
        workers: wanted,
        // EC2 fleets grow with their backlog, up to --max-workers; local:N runs exactly N.
        ...(spec.kind === 'ec2' ? { scale: { maxWorkers: workerCount, waves: config.fleet.scale_waves } } : {}),
        timings: fleet.timings,
        logDir: input.logDir,
        version: input.version,
        events,
        progress,
        pricePerWorkerHour: ec2Price?.usdPerHour ?? 0,
        retryErrors: fleet.retryErrors,
        ...(launchedEarly !== undefined ? { launchedEarly } : {}),
        resumeCommand,
        signal: ac.signal,
      });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      // Only a worker that died or was killed can have left sandboxes (a sweep costs a Docker round).
      if (input.sandbox && launcher instanceof LocalLauncher && launcher.abnormalExits() > 0) await sweepLocalSandboxes(config);
      // Workers still winding down (the queues are gone) do not hold this process.
      if (launcher instanceof LocalLauncher) launcher.detach();
    }
    if (secrets && r.end === 'complete') {
      try {
        events.add('secrets_deleted', { parameters: await deleteFleetSecrets(ssm, config.fleet.secrets_prefix, fleetId) });
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        events.add('warning', { kind: 'secrets_not_deleted', error: why });
        out(`warning: the fleet's secrets could not be deleted (${why}); delete the parameters under ${secretsPath} yourself`);
      }
    }
    if (r.end !== 'complete') {
      if (secrets && Object.keys(secrets).length) out(`the fleet's secrets stay under ${secretsPath} until the fleet completes (a resume replaces them)`);
      out(`fleet ${fleetId} ${r.end === 'stale' ? 'stopped: no progress' : r.end === 'workers-failed' ? 'stopped: its workers keep failing' : 'stopped'}; results are kept in s3://${config.fleet.bucket}/${fleetId}/. Resume with:\n  ${resumeCommand}`);
      return r.end === 'stopped' ? 130 : 1;
    }
    if (input.summary) {
      if (r.rejected.length) out(rejectedLines(r.rejected).join('\n'));
      return input.summary(r, fleetId);
    }
    const m = r.merge!;
    if (flags.json) {
      process.stdout.write(
        `${redactSecrets(JSON.stringify({ fleet_id: fleetId, log: m.path, status: m.status, enqueued: r.enqueued, retried: r.retried, launched: r.launched.length, failed_jobs: m.rows.filter((x) => x.dead).map((x) => ({ job_id: x.jobId, error: x.error, ...x.dead })), rejected_messages: r.rejected.map(({ excerpt: _, ...x }) => x), samples: m.rows }))}\n`,
      );
    } else printFleetSummary(fleetId, r.enqueued, r.retried, r.launched.length, m, r.rejected);
    // `error`: samples failed under fail_on_error (log/final-status.ts) or jobs have no result.
    return m.status === 'error' ? 1 : 0;
  } finally {
    sqs.destroy();
    s3.destroy();
    ssm.destroy();
    sts.destroy();
  }
}

/** Merged logs of `fleetId` that still exist in `logDir`: those its events.jsonl names, and `also`. */
function earlierMergedLogs(logDir: string, fleetId: string, also: readonly string[]): string[] {
  const events = join(logDir, 'fleet', fleetId, 'events.jsonl');
  const paths = new Set<string>(also);
  if (existsSync(events)) {
    for (const line of readFileSync(events, 'utf8').split('\n')) {
      try {
        const e = JSON.parse(line) as { event?: string; path?: unknown; paths?: unknown };
        if (e.event === 'merge' && typeof e.path === 'string') paths.add(e.path);
        if (e.event === 'merge' && Array.isArray(e.paths)) for (const p of e.paths) if (typeof p === 'string') paths.add(p);
      } catch {
        // a line cut short by a killed controller
      }
    }
  }
  return [...paths].filter((p) => existsSync(p));
}

/** Sandboxes of local workers that were killed (their process is gone) are removed at the end. */
async function sweepLocalSandboxes(config: Config): Promise<void> {
  const { createProvider } = await import('../sandbox/registry.js');
  const { RunRegistry, newRunId } = await import('../sandbox/run-registry.js');
  const registry = new RunRegistry(config.state_dir);
  const provider = await createProvider('docker', { config, runId: newRunId(), registry, onNotice: () => {} });
  const swept = await provider.sweep().catch(() => ({ removed: [] as string[] }));
  if (swept.removed.length) process.stderr.write(`removed ${swept.removed.length} sandbox(es) left by killed workers\n`);
  await provider.close?.().catch(() => {});
}

function resumeCommandOf(argv: string[]): string {
  const args = argv.slice(2).filter((a) => a !== '--new-fleet');
  return ['ct', ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

function printFleetSummary(
  fleetId: string,
  enqueued: number,
  retried: number,
  launched: number,
  m: import('../fleet/merge-results.js').MergeOutcome,
  rejected: readonly RejectedReport[],
): void {
  const failures = m.rows.filter((r) => r.dead);
  const lines: string[] = [];
  const totals = scoreTotals(m.rows);
  lines.push(`fleet ${fleetId}: ${enqueued} job(s) enqueued${retried ? ` (${retried} error result(s) retried)` : ''}, ${launched} worker(s) launched`);
  const errors = m.rows.filter((r) => r.error);
  lines.push(`${m.status}: ${m.rows.length} sample(s)${totals ? `; ${totals}` : ''}${errors.length ? `; ${errors.length} error(s) (not scored)` : ''}`);
  if (failures.length) {
    lines.push(`failed jobs (${failures.length}):`);
    for (const f of failures) lines.push(`  ${f.jobId}:`, ...errorExcerpt(f.error!, { maxLines: 4 }).map((l) => `    ${l}`));
  }
  const sampleErrors = errors.filter((r) => !r.dead);
  if (sampleErrors.length) {
    lines.push(`samples with errors (${sampleErrors.length}):`);
    for (const r of sampleErrors) lines.push(`  ${r.jobId}:`, ...errorExcerpt(r.error!, { maxLines: 4 }).map((l) => `    ${l}`));
  }
  lines.push(...rejectedLines(rejected));
  if (m.missing.length) lines.push(`jobs without a result: ${m.missing.join(', ')}`);
  lines.push(`log: ${m.path}`);
  process.stdout.write(`${redactSecrets(lines.join('\n'))}\n`);
}

/** The summary's lines on work messages refused unrun (none: no lines). */
function rejectedLines(rejected: readonly RejectedReport[]): string[] {
  if (!rejected.length) return [];
  return [
    `messages refused (${rejected.length}; work messages unrun and dead-lettered, done messages ignored):`,
    ...rejected.map((x) => `  message ${x.message_id}${x.job_id ? ` (job ${x.job_id})` : ''}${x.worker ? ` refused by ${x.worker}` : ''}: ${x.reason.split('\n')[0]!.slice(0, 300)}`),
  ];
}

/** The read-only part of launching EC2 workers: caller, instance size, AMI. */
async function planEc2(config: Config) {
  const { applyAwsEnvironment } = await import('../cloud/aws-clients.js');
  const { createAwsClients } = await import('../cloud/ec2-clients.js');
  const { preflightCredentials } = await import('../cloud/credentials.js');
  const { instanceSize, concurrencyFor, workerImage } = await import('../fleet/ec2-worker-plan.js');
  applyAwsEnvironment(config.aws_env);
  const clients = createAwsClients(config.ec2.region);
  try {
    const caller = await preflightCredentials(clients, config.aws_env);
    const size = await instanceSize(clients.ec2, config.ec2.instance_type);
    const image = await workerImage(clients.ssm, {
      workerParameter: config.fleet.ami_parameter,
      ...(config.ec2.ami ? { ami: config.ec2.ami } : {}),
      ubuntuParameter: config.ec2.ami_parameter,
    });
    return { caller, size, image, concurrency: concurrencyFor(size) };
  } finally {
    clients.ec2.destroy();
    clients.ssm.destroy();
    clients.sts.destroy();
    clients.instanceConnect.destroy();
  }
}

/** The `ec2` launcher: the workers' security group (created when missing) and their user-data. */
async function ec2Launcher(
  config: Config,
  plan: Awaited<ReturnType<typeof planEc2>>,
  o: { fleetId: string; artifactKey: string; s3: import('@aws-sdk/client-s3').S3Client; spot: boolean; note: (line: string) => void },
) {
  const { createEc2Client } = await import('../cloud/ec2-clients.js');
  const { ensureEgressOnlySecurityGroup } = await import('../cloud/security-group.js');
  const { renderUserData } = await import('../fleet/user-data.js');
  const { Ec2Launcher } = await import('../fleet/ec2-launcher.js');
  const ec2 = createEc2Client(config.ec2.region);
  const securityGroupId = await ensureEgressOnlySecurityGroup(ec2, { name: config.fleet.security_group, ...(config.ec2.subnet_id ? { subnetId: config.ec2.subnet_id } : {}) });
  return new Ec2Launcher({
    ec2,
    s3: o.s3,
    fleetId: o.fleetId,
    region: config.ec2.region,
    bucket: config.fleet.bucket,
    imageId: plan.image.imageId,
    instanceType: config.ec2.instance_type,
    securityGroupId,
    ...(config.ec2.subnet_id ? { subnetId: config.ec2.subnet_id } : {}),
    rootVolumeGb: config.ec2.root_volume_gb,
    instanceProfile: config.fleet.instance_profile,
    launchedBy: plan.caller.name,
    namePrefix: config.ec2.name_prefix,
    spot: o.spot,
    launchAttempts: config.fleet.launch_attempts,
    bootstrapFailures: config.fleet.bootstrap_failures,
    note: o.note,
    userData: renderUserData({
      fleetId: o.fleetId,
      region: config.ec2.region,
      bucket: config.fleet.bucket,
      artifactKey: o.artifactKey,
      deadmanMinutes: Math.ceil(config.fleet.stale_teardown_minutes + config.fleet.deadman_margin_minutes),
      dockerNameParameter: config.fleet.docker_org_name_parameter,
      dockerPatParameter: config.fleet.docker_org_pat_parameter,
    }),
  });
}

/** Who started the fleet, for its tags, where no STS is asked: this machine's user. */
function localCaller(): { arn: string; account: string; name: string } {
  let name = process.env.USER ?? 'unknown';
  try {
    name = userInfo().username;
  } catch {
    // no passwd entry: the environment's name
  }
  return { arn: '', account: '', name: name.replace(/[^A-Za-z0-9_.@-]/g, '-').slice(0, 64) || 'unknown' };
}

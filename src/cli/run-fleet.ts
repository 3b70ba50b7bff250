/**
 * `ct run eval --fleet` / `--ec2`: the fleet flags of `ct run eval` and the controller command.
 * run-eval.ts adds the flags (`addFleetOptions`) and hands over when `isFleetRun(flags)`.
 */
import { errorExcerpt } from '../eval/error-excerpt.js';
import { rm } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { fileURLToPath } from 'node:url';
import { Option, type Command } from 'commander';
import type { Config } from '../config/config.js';
import { ConfigError } from '../errors.js';
import type { SampleOptions } from '../eval/sample-options.js';
import { PROTOCOL_VERSION, type Manifest } from '../fleet/protocol.js';
import type { Policy } from '../policies/types.js';
import type { Sample } from '../tasks/types.js';
import { collect, positiveInt, positiveNumber } from './parse.js';
import { scoreTotals } from './score-totals.js';

export interface FleetFlags {
  fleet?: boolean;
  ec2?: boolean;
  workers?: string;
  maxWorkers?: number;
  estimate?: boolean;
  yes?: boolean;
  newFleet?: boolean;
  extraSrc: string[];
  workerSetup?: string;
  price?: number;
  spot?: boolean;
  onDemand?: boolean;
  concurrency?: number;
}

/** The fleet flags of `ct run eval`. */
export function addFleetOptions(cmd: Command): Command {
  return cmd
    .option('--fleet', 'run on a fleet of workers fed by an SQS queue, results in S3 (see --workers)')
    .option('--ec2', 'fleet mode with EC2 workers (= --fleet --workers ec2)')
    .option('--workers <kind>', 'with --fleet: local:N (N worker processes here, sharing this environment), external (you start them; API keys reach them through SSM), ec2 (default)')
    .option('--max-workers <n>', 'with --fleet: workers at most (default 10, CT_FLEET_MAX_WORKERS)', positiveInt)
    .option('--estimate', 'with --fleet: print the jobs, workers, time and cost, then exit without starting anything (with --json: the estimate as JSON on stdout)')
    .option('--price <usd-per-hour>', 'with --ec2: USD per worker instance-hour for the estimate, instead of the price table (fleet.price_per_hour)', positiveNumber)
    .option('-y, --yes', 'with --fleet: start without asking (needed when there is no terminal)')
    .option('--new-fleet', 'with --fleet: drop earlier results of the same fleet and start over (default: resume)')
    .option('--extra-src <dir>', 'with --fleet: ship DIR to workers as an import root for module:export policies and sandboxes (repeatable)', collect, [])
    .addOption(new Option('--worker-setup <basename/path>', 'with --fleet: a script inside an --extra-src tree that workers run before taking jobs'))
    .option('--spot', 'with --ec2: spot instances, on-demand when spot capacity is refused (default; fleet.spot, CT_FLEET_SPOT)')
    .option('--on-demand', 'with --ec2: on-demand instances only')
    .option('--concurrency <n>', 'with --ec2: samples each worker runs at once (default: from the instance type, 10 on c7i.4xlarge)', positiveInt)
    .addHelpText(
      'after',
      '\nFleet examples:\n' +
        '  ct run eval --fleet --workers local:2 --task-file demo --policy test --epochs 5 --yes\n' +
        '  ct run eval --fleet --workers external --task-file demo --epochs 10 --estimate\n' +
        '  ct run eval --ec2 --task-file medium --policy honest --epochs 10 --max-workers 20\n',
    );
}

export function isFleetRun(flags: FleetFlags): boolean {
  return Boolean(flags.fleet || flags.ec2);
}

/** Fleet flags given without --fleet are refused rather than ignored. */
export function checkNoFleetFlags(flags: FleetFlags): void {
  const given = [
    flags.workers !== undefined && '--workers',
    flags.maxWorkers !== undefined && '--max-workers',
    flags.estimate && '--estimate',
    flags.newFleet && '--new-fleet',
    flags.extraSrc.length > 0 && '--extra-src',
    flags.workerSetup !== undefined && '--worker-setup',
    flags.price !== undefined && '--price',
    flags.spot && '--spot',
    flags.onDemand && '--on-demand',
    flags.concurrency !== undefined && '--concurrency',
  ].filter(Boolean);
  if (given.length) throw new ConfigError(`${given.join(', ')} only apply to fleet runs; add --fleet (or --ec2)`);
}

export interface FleetRunInput {
  flags: FleetFlags & { quiet?: boolean; json?: boolean; failOnError: boolean; policy: string; sandbox: string };
  config: Config;
  samples: Sample[];
  epochs: number;
  policy: Policy;
  policyArgs: Record<string, string>;
  taskName: string;
  sampleOptions: SampleOptions;
  /** Samples each worker runs at once (--max-samples, else fleet.samples_per_worker). */
  perWorker: number;
  version: string;
  /** The command line, for the resume hint. */
  argv: string[];
  /** The `-e` values as given (checked for mixed setting:env and bare forms). */
  envFlags: string[];
}

/** ct's own checkout: the code workers run. */
const CT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Runs the controller; returns the exit code. */
export async function runFleetCommand(input: FleetRunInput): Promise<number> {
  const { flags, config } = input;
  const workers = flags.ec2 ? 'ec2' : (flags.workers ?? 'ec2');
  if (flags.ec2 && flags.workers !== undefined && flags.workers !== 'ec2') throw new ConfigError(`--ec2 means --workers ec2; it cannot go with --workers ${flags.workers}`);
  const { parseWorkersSpec, LocalLauncher, ExternalLauncher } = await import('../fleet/launcher.js');
  const spec = parseWorkersSpec(workers);
  if (flags.spot && flags.onDemand) throw new ConfigError('--spot and --on-demand exclude each other');
  if (spec.kind !== 'ec2' && (flags.spot || flags.onDemand || flags.concurrency !== undefined || flags.price !== undefined)) {
    throw new ConfigError('--spot, --on-demand, --concurrency and --price apply to EC2 workers (--ec2 or --workers ec2)');
  }

  // Everything below is checked before any AWS call: bad input creates nothing.
  const { parseFleetEnvs, pinSettings } = await import('../fleet/settings-pin.js');
  parseFleetEnvs(input.envFlags, config.default_setting);
  const { resolveExtraSrc, packExtraSrc, extraSrcHash, resolveWorkerSetup } = await import('../fleet/extra-src.js');
  const trees = resolveExtraSrc(flags.extraSrc, process.cwd());
  const workerSetup = flags.workerSetup !== undefined ? resolveWorkerSetup(flags.workerSetup, trees) : undefined;
  // A `module:export` sandbox must load here from the same roots workers import it from (the
  // policy was checked the same way); the provider itself is only built on workers.
  const { isExternalSandboxSpec, loadSandboxExport } = await import('../sandbox/external-provider.js');
  if (isExternalSandboxSpec(flags.sandbox)) await loadSandboxExport(flags.sandbox, [process.cwd(), ...flags.extraSrc.map((d) => resolve(d))]);
  const { checkCredentialSources } = await import('../cloud/credentials.js');
  checkCredentialSources(config.aws_env);
  const packed = trees.map(packExtraSrc);
  // EC2 workers: who is launching, the instance type's size and the AMI, all read-only, all before anything is created.
  let perWorker = input.perWorker;
  let ec2Plan: Awaited<ReturnType<typeof planEc2>> | undefined;
  if (spec.kind === 'ec2') {
    ec2Plan = await planEc2(config);
    perWorker = flags.concurrency ?? ec2Plan.concurrency;
  }
  // The worker-hour price, also before anything is created: a type the table lacks stops here (exit 2).
  const { ec2WorkerPrice } = await import('../fleet/estimate.js');
  const ec2Price =
    spec.kind === 'ec2'
      ? ec2WorkerPrice(config.fleet, {
          instanceType: config.ec2.instance_type,
          region: config.ec2.region,
          spot: flags.onDemand ? false : flags.spot ? true : config.fleet.spot,
          ...(flags.price !== undefined ? { pricePerHour: flags.price } : {}),
        })
      : undefined;

  const { jobsOf, pinLocalSettings } = await import('../fleet/build-manifest.js');
  const { fleetId: fleetIdOf } = await import('../fleet/fleet-id.js');
  const { codeSnapshot, buildArchive, uploadArtifact, artifactKey } = await import('../fleet/code-artifact.js');
  const git = { timeoutSeconds: config.git.timeout, env: process.env };
  const code = await codeSnapshot(CT_ROOT, git);
  if (code.warning) process.stderr.write(`warning: ${code.warning}\n`);
  const jobs = jobsOf(input.samples, input.epochs);
  const settingNames = [...new Set(jobs.map((j) => j.setting))];
  let settings;
  try {
    const { SettingsRegistry } = await import('../tasks/settings-registry.js');
    const { SettingsLock } = await import('../tasks/settings-lock.js');
    const { GitRunner } = await import('../tasks/git-runner.js');
    settings = await pinSettings(settingNames, {
      registry: new SettingsRegistry(config, process.cwd()),
      lock: SettingsLock.read(process.cwd()),
      settingsDir: config.settings_dir,
      git: new GitRunner(git),
    });
  } catch (e) {
    // Workers on this machine read the same settings folder: a setting that is only a local folder is fine for them.
    if (!(e instanceof ConfigError) || spec.kind !== 'local') throw e;
    settings = pinLocalSettings(config, settingNames);
  }
  const maxWorkers = flags.maxWorkers ?? config.fleet.max_workers;
  // Workers elsewhere get the keys through the fleet's SSM parameters; local ones inherit this environment.
  const { fleetSecretsFromConfig, fleetSecretsPath, replaceFleetSecrets, deleteFleetSecrets } = await import('../fleet/secrets.js');
  const secrets = spec.kind === 'local' ? undefined : fleetSecretsFromConfig(config);
  const workerCount = spec.kind === 'local' ? Math.min(spec.count, maxWorkers) : maxWorkers;
  const base: Omit<Manifest, 'fleet_id' | 'created'> = {
    version: PROTOCOL_VERSION,
    task_name: input.taskName,
    epochs: input.epochs,
    policy: { name: flags.policy, args: input.policyArgs },
    ...(input.policy.model ? { model: input.policy.model } : {}),
    sample_options: input.sampleOptions,
    samples_per_worker: perWorker,
    code: { sha: code.sha, kind: code.kind, artifact_key: artifactKey(code.sha) },
    settings,
    extra_src: packed.map((p) => ({ name: p.name, sha256: p.sha256 })),
    sandbox: { spec: flags.sandbox, ...(workerSetup ? { worker_setup: workerSetup } : {}) },
    jobs,
  };
  const xsHash = extraSrcHash(packed);
  const fleetId = fleetIdOf({
    codeSha: code.sha,
    policy: base.policy,
    ...(base.model ? { model: base.model } : {}),
    sampleIds: input.samples.map((s) => s.id),
    epochs: input.epochs,
    sandbox: flags.sandbox,
    ...(workerSetup ? { workerSetupHash: workerSetup.sha256 } : {}),
    ...(xsHash ? { extraSrcHash: xsHash } : {}),
    settings: settings.map((x) => `${x.name}@${x.commit}`),
    options: { sample_options: input.sampleOptions, settings_of: jobs.map((j) => j.setting) },
  });
  const manifest: Manifest = { ...base, fleet_id: fleetId, created: new Date().toISOString() };

  const { applyAwsEnvironment, createFleetClients } = await import('../cloud/aws-clients.js');
  applyAwsEnvironment(config.aws_env);
  const { SqsJobQueue } = await import('../fleet/sqs-job-queue.js');
  const { S3ResultStore } = await import('../fleet/s3-result-store.js');
  const { inspectFleet, runFleet } = await import('../fleet/controller.js');
  const { estimateFleet, formatEstimate, ec2WorkerOverhead, estimateJson } = await import('../fleet/estimate.js');
  const { sqs, s3, ssm, sts } = createFleetClients(config.ec2.region);
  // Credentials checked before anything is created; the caller's name tags what the fleet creates.
  const { preflightCredentials } = await import('../cloud/credentials.js');
  const { MANAGED_BY, TAGS } = await import('../cloud/tags.js');
  const identity = ec2Plan?.caller ?? (await preflightCredentials({ sts }, config.aws_env));
  // Bucket, instance profile, sandbox host: a problem stops here, before the estimate, with nothing created.
  await (await import('../fleet/preflight.js')).preflightFleet({ config, workers: spec, sandbox: flags.sandbox, s3, warn: (l) => process.stderr.write(`warning: ${l}\n`) });
  const queue = new SqsJobQueue({
    sqs,
    fleetId,
    queuePrefix: config.fleet.queue_prefix,
    tags: { [TAGS.fleetId]: fleetId, [TAGS.launchedBy]: identity.name, [TAGS.managedBy]: MANAGED_BY },
  });
  const store = new S3ResultStore({ s3, bucket: config.fleet.bucket, fleetId });
  const out = (s: string) => process.stderr.write(`${s}\n`);
  try {
    let state = flags.newFleet ? { done: new Set<string>() } : await inspectFleet(store, manifest);
    // Same jobs as before: keep the first controller's creation time (it names the merged log).
    if (state.prior) manifest.created = state.prior.created;
    // EC2 workers: as many as the backlog needs at `perWorker` each, at most --max-workers.
    const wanted = spec.kind === 'ec2' ? Math.min(workerCount, Math.max(1, Math.ceil((jobs.length - state.done.size) / perWorker))) : workerCount;
    const estimate = estimateFleet({
      fleetId,
      jobs: jobs.length,
      done: state.done.size,
      workers: wanted,
      perWorker,
      secondsPerSample: config.fleet.estimate_seconds_per_sample,
      ...(spec.kind === 'ec2' ? { overhead: ec2WorkerOverhead(config.fleet) } : {}),
      pricePerWorkerHour: ec2Price?.usdPerHour ?? 0,
      ...(ec2Price ? { priceSource: ec2Price.source } : {}),
    });
    const label =
      spec.kind === 'local'
        ? `local processes on this machine`
        : ec2Plan
          ? `${config.ec2.instance_type} EC2 instances (${flags.onDemand || !config.fleet.spot ? 'on-demand' : 'spot, on-demand fallback'}; ${ec2Plan.image.kind === 'worker-ami' ? `worker AMI ${ec2Plan.image.imageId}` : `stock Ubuntu ${ec2Plan.image.imageId}`})`
          : 'started by you on your machines';
    out(formatEstimate(estimate, label));
    const secretsPath = fleetSecretsPath(config.fleet.secrets_prefix, fleetId);
    if (secrets) {
      const names = Object.keys(secrets).sort();
      out(
        names.length
          ? `secrets: ${names.join(', ')} reach workers as SSM SecureString parameters under ${secretsPath} (deleted when the fleet ends)`
          : 'secrets: no model API key or git token is set here; workers use their own environment',
      );
    }
    if (flags.estimate) {
      if (flags.json) process.stdout.write(`${JSON.stringify(estimateJson(estimate))}\n`);
      return 0;
    }
    if (!flags.yes) {
      if (!process.stdin.isTTY) throw new ConfigError('no terminal to confirm on: pass --yes to start the fleet (or --estimate to only see the estimate)');
      const rl = createInterface({ input: process.stdin, output: process.stderr });
      const answer = await rl.question('Proceed? [y/N] ');
      rl.close();
      if (!/^y(es)?$/i.test(answer.trim())) {
        out('not started');
        return 0;
      }
    }
    if (flags.newFleet) {
      const { deleteFleetObjects } = await import('../fleet/delete-fleet-objects.js');
      await deleteFleetObjects(s3, config.fleet.bucket, fleetId);
      state = { done: new Set() };
    }

    const { FleetEventsLog } = await import('../fleet/events-log.js');
    const { createFleetProgress } = await import('../fleet/fleet-progress.js');
    const events = new FleetEventsLog(config.log_dir, fleetId);
    // Before any job is queued, so a worker never starts without them; names only, never values.
    if (secrets) events.add('secrets_stored', { parameters: await replaceFleetSecrets(ssm, config.fleet.secrets_prefix, fleetId, secrets) });
    const progress = createFleetProgress(process.stderr, Boolean(flags.quiet));
    const launcher: import('../fleet/launcher.js').FleetLauncher =
      ec2Plan
        ? await ec2Launcher(config, ec2Plan, { fleetId, artifactKey: manifest.code!.artifact_key, perWorker, s3, spot: flags.onDemand ? false : config.fleet.spot, note: (l) => progress.note(l) })
        : spec.kind === 'local'
        ? new LocalLauncher({
            fleetId,
            region: config.ec2.region,
            concurrency: input.perWorker,
            cwd: process.cwd(),
            env: process.env,
            logDir: join(config.log_dir, 'fleet', fleetId),
          })
        : new ExternalLauncher({ fleetId, region: config.ec2.region });
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
          // What workers elsewhere need: the code at its SHA and the extra-src trees (each skipped when present).
          const file = await buildArchive(code.root, code.sha, git);
          try {
            await uploadArtifact(store, code.sha, file);
          } finally {
            await rm(dirname(file), { recursive: true, force: true });
          }
          for (const p of packed) await store.putArtifact(p.sha256, p.gzip);
        },
        manifest,
        state,
        launcher,
        workers: wanted,
        timings: {
          visibilityTimeout: config.fleet.visibility_timeout,
          maxReceiveCount: config.fleet.max_receive_count,
          pollSeconds: config.fleet.poll_seconds,
          checkSeconds: config.fleet.check_seconds,
          staleWarningMinutes: config.fleet.stale_warning_minutes,
          staleTeardownMinutes: config.fleet.stale_teardown_minutes,
        },
        logDir: config.log_dir,
        version: input.version,
        events,
        progress,
        pricePerWorkerHour: ec2Price?.usdPerHour ?? 0,
        resumeCommand,
        signal: ac.signal,
      });
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      if (spec.kind === 'local') await sweepLocalSandboxes(config);
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
    const m = r.merge!;
    if (flags.json) {
      process.stdout.write(
        `${JSON.stringify({ fleet_id: fleetId, log: m.path, status: m.status, enqueued: r.enqueued, launched: r.launched.length, failed_jobs: m.rows.filter((x) => x.dead).map((x) => ({ job_id: x.jobId, error: x.error, ...x.dead })), samples: m.rows })}\n`,
      );
    } else printFleetSummary(fleetId, r.enqueued, r.launched.length, m);
    const failed = m.rows.some((x) => x.error) || m.missing.length > 0;
    return failed && flags.failOnError ? 1 : 0;
  } finally {
    sqs.destroy();
    s3.destroy();
    ssm.destroy();
    sts.destroy();
  }
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
  launched: number,
  m: import('../fleet/merge-results.js').MergeOutcome,
): void {
  const failures = m.rows.filter((r) => r.dead);
  const lines: string[] = [];
  const totals = scoreTotals(m.rows);
  lines.push(`fleet ${fleetId}: ${enqueued} job(s) enqueued, ${launched} worker(s) launched`);
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
  if (m.missing.length) lines.push(`jobs without a result: ${m.missing.join(', ')}`);
  lines.push(`log: ${m.path}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

/** The read-only part of launching EC2 workers: caller, instance size, AMI. */
async function planEc2(config: Config) {
  const { applyAwsEnvironment, createAwsClients } = await import('../cloud/aws-clients.js');
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
  o: { fleetId: string; artifactKey: string; perWorker: number; s3: import('@aws-sdk/client-s3').S3Client; spot: boolean; note: (line: string) => void },
) {
  const { EC2Client } = await import('@aws-sdk/client-ec2');
  const { ensureEgressOnlySecurityGroup } = await import('../cloud/security-group.js');
  const { renderUserData } = await import('../fleet/user-data.js');
  const { Ec2Launcher } = await import('../fleet/ec2-launcher.js');
  const ec2 = new EC2Client({ region: config.ec2.region, maxAttempts: 5 });
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
      concurrency: o.perWorker,
      deadmanMinutes: Math.ceil(config.fleet.stale_teardown_minutes + config.fleet.deadman_margin_minutes),
      dockerNameParameter: config.fleet.docker_org_name_parameter,
      dockerPatParameter: config.fleet.docker_org_pat_parameter,
    }),
  });
}

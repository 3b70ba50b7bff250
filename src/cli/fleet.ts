import { hostname } from 'node:os';
import { Option, type Command } from 'commander';
import { loadConfig } from '../config/config.js';
import { redactSecrets } from '../config/secret-registry.js';
import { ConfigError, cloudError } from '../errors.js';
import { settingsGitRunner } from '../tasks/settings-git.js';
import { positiveInt } from './parse.js';
import { ctVersion } from './version.js';

interface WorkerFlags {
  fleet: string;
  region?: string;
  concurrency?: number;
  secrets?: string;
  spotWatch?: boolean;
  exitWithParent?: boolean;
  waitForFleet?: number;
}

const FLEET_ID = /^[A-Za-z0-9_-]{1,64}$/;

export function registerFleetCommands(program: Command): void {
  const fleet = program.command('fleet').description('Fleet mode (`ct run eval --fleet`): the commands workers run, and discarding a fleet.');
  fleet
    .command('worker')
    .description(
      "Take a fleet's jobs from its SQS work queue, run each sample with Docker on this machine and upload its .eval to S3, " +
        'until the work is done (then exit 0).',
    )
    .requiredOption('--fleet <id>', 'the fleet whose jobs to run (the controller prints it)')
    .option('--region <region>', 'AWS region of the fleet (default: ec2.region, CT_EC2_REGION, us-east-1)')
    .option('--concurrency <n>', "samples run at once, fixed (default: the fleet's samples per worker: fixed when the run gave it with --concurrency or --max-samples, else a start cut to this machine's CPUs and memory that adapts: one more after each clean finish with every slot busy while memory and CPUs allow, up to fleet.max_concurrency (CT_FLEET_MAX_CONCURRENCY, 32); halved after a sandbox start failure or an out-of-memory kill, a quarter less under memory pressure)", positiveInt)
    .addOption(
      new Option('--secrets <from>', "where the fleet's API keys come from: ssm (its parameters; this machine's own values win) or env (this machine only) (default: fleet.worker_secrets, CT_FLEET_WORKER_SECRETS, ssm)").choices(['ssm', 'env']),
    )
    .option('--wait-for-fleet <seconds>', "wait up to this long for the fleet's manifest and queues (a worker started while its controller sets the fleet up)", positiveInt)
    .option('--exit-with-parent', 'stop (handing back its jobs) when stdin closes: the process that started this worker and holds its stdin is gone (local: workers)')
    .option('--spot-watch', 'on an EC2 spot instance: watch the instance metadata for an interruption notice (then take no more jobs and queue unfinished ones again before the deadline)')
    .addHelpText(
      'after',
      '\nExample:\n  ct fleet worker --fleet 3f9c0d6a1b2c --region us-east-1 --concurrency 4\n' +
        '\nNeeds Docker and AWS credentials (the usual AWS_* variables or a profile). Before taking jobs it fetches each\n' +
        "setting at the commit the fleet pinned into <state_dir>/fleet/settings (git credentials as for `ct settings pull`:\n" +
        'GH_TOKEN with git.token_hosts, SSH keys, credential helpers); if it cannot, it exits non-zero and the jobs stay queued.\n' +
        "Model API keys and the git token come from the fleet's SSM SecureString parameters (the controller stores\n" +
        'them under fleet.secrets_prefix/<fleet id>/ and deletes them when the fleet ends); a key this machine sets\n' +
        'itself (environment, .env or config) wins. `local:` workers run with --secrets env and need no SSM access.\n' +
        'Stops when the controller deleted the fleet\'s queues, or after fleet.idle_polls empty polls in a row\n' +
        '(CT_FLEET_IDLE_POLLS) with nothing running and nothing queued, or (exit 0, the fleet goes on) after\n' +
        'fleet.idle_minutes (CT_FLEET_IDLE_MINUTES, 10) without a job while other workers finish theirs. On SIGTERM or Ctrl-C it takes no more jobs,\n' +
        'hands back what it had not started, cancels running samples and hands their jobs back (exit 143 on SIGTERM,\n130 on Ctrl-C);\n' +
        'a second signal exits at once.\n',
    )
    .action(async (flags: WorkerFlags) => {
      process.exitCode = await workerCommand(flags);
    });
  fleet
    .command('discard')
    .description("Remove a fleet's SQS queues and SSM secrets (its results in S3 stay unless --delete-results): one nobody runs any more, such as an abandoned fleet.")
    .argument('<fleet-id>', 'the fleet to discard (`ct cloud status` lists fleets and marks abandoned ones)')
    .option('--delete-results', 'also delete every object under s3://<fleet.bucket>/<fleet id>/ (manifest, results, worker logs)')
    .option('-y, --yes', 'discard without asking (required without a terminal)')
    .option('--region <region>', 'AWS region of the fleet (default: ec2.region, CT_EC2_REGION, us-east-1)')
    .option('--json', 'print one JSON object: {"fleetId", "state", "removed": [...], "failed": [...], "results": "kept" | "deleted" | "none", ...}')
    .addHelpText(
      'after',
      '\nExamples:\n  ct fleet discard 3f9c0d6a1b2c3d4e\n  ct fleet discard 3f9c0d6a1b2c3d4e --delete-results --yes --region us-west-2\n' +
        '\nShows the fleet (finished, abandoned or unfinished; jobs without a result) and what will be removed, then asks.\n' +
        'Without a terminal, pass --yes (else exit 2). Any user\'s fleet can be discarded by its id; its owner is shown.\n' +
        'Refused (exit 2, nothing removed): an id with no queues, no objects and no secrets, and a fleet with a live\n' +
        'worker instance (it may still be running: stop its controller, or terminate its workers first). A fleet that made\n' +
        'progress within fleet.stale_teardown_minutes is discarded with a warning: a controller with local or external\n' +
        'workers may still be running it. `ct cloud cleanup` offers every abandoned fleet of yours the same way.\n' +
        'Exit 1 when something could not be removed.\n',
    )
    .action(async (id: string, flags: import('./fleet-discard.js').DiscardFlags) => {
      if (!FLEET_ID.test(id)) throw new ConfigError(`fleet id ${JSON.stringify(id)}: expected up to 64 of A-Z a-z 0-9 _ -`);
      const { discardCommand } = await import('./fleet-discard.js');
      process.exitCode = await discardCommand(id, flags);
    });
}

async function workerCommand(flags: WorkerFlags): Promise<number> {
  if (!FLEET_ID.test(flags.fleet)) throw new ConfigError(`--fleet ${JSON.stringify(flags.fleet)}: expected up to 64 of A-Z a-z 0-9 _ -`);
  const load = () => loadConfig({ cwd: process.cwd(), env: process.env, overrides: { 'ec2.region': flags.region, 'fleet.worker_secrets': flags.secrets } });
  let config = load();
  const { applyAwsEnvironment, createFleetClients } = await import('../cloud/aws-clients.js');
  const { checkCredentialSources } = await import('../cloud/credentials.js');
  checkCredentialSources(config.aws_env);
  applyAwsEnvironment(config.aws_env);
  const { SqsJobQueue } = await import('../fleet/sqs-job-queue.js');
  const { S3ResultStore } = await import('../fleet/s3-result-store.js');
  const { runWorker } = await import('../fleet/worker.js');
  const { sqs, s3, ssm } = createFleetClients(config.ec2.region);
  // The worker's log is uploaded with its results: no line may carry a secret.
  const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${redactSecrets(line)}\n`);
  try {
    await requireFleet(s3, config.fleet.bucket, flags.fleet, config.ec2.region);
  } catch (e) {
    for (const c of [sqs, s3, ssm]) c.destroy();
    throw e;
  }
  const { fleetWithoutAws } = await import('../cloud/endpoint.js');
  if (config.fleet.worker_secrets === 'ssm' && fleetWithoutAws(config.aws_env)) {
    log('no SSM on a fleet without AWS (SQS and S3 on servers of their own): API keys come from this machine\'s environment (--secrets env)');
    ssm.destroy();
  } else if (config.fleet.worker_secrets === 'ssm') {
    const { fleetSecretsFromConfig } = await import('../fleet/secrets.js');
    const { takeFleetSecrets } = await import('../fleet/worker-secrets.js');
    try {
      const got = await takeFleetSecrets(ssm, config.fleet.secrets_prefix, flags.fleet, fleetSecretsFromConfig(config), process.env);
      // The keys now in the environment reach the policy through the config, as a local run's do.
      if (got.taken.length) config = load();
      if (got.taken.length || got.kept.length) {
        log(`fleet secrets from SSM: ${got.taken.join(', ') || 'none'}${got.kept.length ? `; this machine's own value kept for ${got.kept.join(', ')}` : ''}`);
      }
    } finally {
      ssm.destroy();
    }
  } else ssm.destroy();
  let queue: InstanceType<typeof SqsJobQueue>;
  let store: InstanceType<typeof S3ResultStore>;
  try {
    queue = new SqsJobQueue({ sqs, fleetId: flags.fleet, queuePrefix: config.fleet.queue_prefix });
    store = new S3ResultStore({ s3, bucket: config.fleet.bucket, fleetId: flags.fleet });
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  const parentGone = new AbortController();
  if (flags.exitWithParent) {
    process.stdin.on('end', () => parentGone.abort());
    process.stdin.on('close', () => parentGone.abort());
    process.stdin.on('error', () => parentGone.abort());
    process.stdin.resume();
  }
  try {
    const result = await runWorker({
      queue,
      store,
      config,
      ...(flags.concurrency !== undefined ? { concurrency: flags.concurrency } : {}),
      workerName: config.fleet.worker_name ?? `${hostname()}-${process.pid}`,
      version: ctVersion(),
      cwd: process.cwd(),
      git: settingsGitRunner(config, process.env),
      log,
      ...(flags.spotWatch ? { spotNotice: await spotNoticeReader(config.aws_env) } : {}),
      ...(flags.exitWithParent ? { parentGone: parentGone.signal } : {}),
      ...(flags.waitForFleet ? { waitForFleetSeconds: flags.waitForFleet } : {}),
    });
    return result.exitCode;
  } finally {
    if (flags.exitWithParent) process.stdin.destroy();
    sqs.destroy();
    s3.destroy();
  }
}

/**
 * A fleet exists when its manifest does. An unknown id is bad input (exit 2), whether the bucket
 * exists or not; the bucket is asked only to say which of the two it is.
 */
async function requireFleet(s3: import('@aws-sdk/client-s3').S3Client, bucket: string, fleetId: string, region: string): Promise<void> {
  const { HeadBucketCommand, HeadObjectCommand } = await import('@aws-sdk/client-s3');
  const { fleetNames } = await import('../fleet/protocol.js');
  const key = fleetNames(fleetId, '').manifestKey;
  const status = (e: unknown) => (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  try {
    await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    return;
  } catch (e) {
    if (status(e) === 403) {
      throw new ConfigError(`no access to s3://${bucket}/${key} (region ${region}): these credentials may not read the fleet's bucket; check fleet.bucket (CT_FLEET_BUCKET) and --region`);
    }
    if (status(e) !== 404) throw cloudError(e, `checking s3://${bucket}/${key}`);
  }
  let bucketExists = true;
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch (e) {
    if (status(e) !== 404) throw cloudError(e, `checking bucket ${bucket}`);
    bucketExists = false;
  }
  throw new ConfigError(
    `no such fleet ${fleetId} in bucket ${bucket} (region ${region})${bucketExists ? '' : '; the bucket does not exist there'}: ` +
      'check the id the controller printed, --region and fleet.bucket (CT_FLEET_BUCKET)',
  );
}

/** The instance metadata's spot notice, at AWS_EC2_METADATA_SERVICE_ENDPOINT (default: the instance's own, 169.254.169.254). */
async function spotNoticeReader(awsEnv: Record<string, string>): Promise<() => Promise<Date | undefined>> {
  const { spotInterruptionTime } = await import('../fleet/spot-notice.js');
  const endpoint = awsEnv.AWS_EC2_METADATA_SERVICE_ENDPOINT ?? 'http://169.254.169.254';
  return () => spotInterruptionTime(endpoint);
}

/**
 * `ct cloud status | cleanup | put-docker-auth | build-ami | iam-policy`: what ct has in an AWS region, removing
 * what it left behind, storing registry credentials for workers, baking the worker AMI, and the IAM policies
 * the fleet needs. Every command but iam-policy (pure rendering) checks the AWS credentials first (the EC2
 * sandbox's rules: src/cloud/credentials.ts).
 */
import { Option, type Command } from 'commander';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Config } from '../config/config.js';
import type { CallerIdentity } from '../cloud/credentials.js';
import { POLICY_ROLES, type PolicyRole } from '../cloud/iam-policies.js';

/** ct's own checkout (dist/src/cli -> the repository): its package.json and lock go into the AMI's npm cache. */
const CT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

interface CommonFlags {
  region?: string;
}

export function registerCloudCommands(program: Command): void {
  const cloud = program.command('cloud').description("ct's AWS resources: fleets, EC2 sandboxes, AMI builders; cleanup; registry credentials in SSM; the worker AMI; the fleet's IAM policies.");
  cloud
    .command('status')
    .description('Show fleets (workers, queue counts, results, cost so far; finished or abandoned), EC2 sandboxes and AMI builders: yours, or everyone\'s with --all-users.')
    .option('--all-users', "include other users' resources and fleets whose owner is unknown")
    .option('--region <region>', 'AWS region (default: ec2.region, CT_EC2_REGION, us-east-1)')
    .option('--json', 'print one JSON object')
    .addHelpText(
      'after',
      '\nExamples:\n  ct cloud status\n  ct cloud status --all-users --region us-west-2\n  ct cloud status --json | jq \'.fleets[] | {fleetId, counts}\'\n' +
        '\nYours means instances tagged LaunchedBy=<your IAM user name or SSO session name>, and fleets with such a worker\n' +
        '(or whose queues carry that tag). Cost so far = running time x the price table (data/ec2-prices.json, fleet.prices).\n' +
        'A fleet is abandoned when it is unfinished, holds queues or secrets, has no live worker instance and made no progress (no\n' +
        'object under s3://<fleet.bucket>/<fleet id>/ changed) for fleet.stale_teardown_minutes (default 180,\n' +
        'CT_FLEET_STALE_TEARDOWN_MINUTES): a controller stops itself after that long, so none runs it. `ct fleet discard` removes it.\n',
    )
    .action(async (flags: CommonFlags & { allUsers?: boolean; json?: boolean }) => {
      const { gatherInventory } = await import('../cloud/inventory.js');
      const { formatStatus, statusReport } = await import('../cloud/status-report.js');
      await withCloud(flags, async (config, caller, c) => {
        const inv = await gatherInventory(inventoryOptions(config, c));
        const report = statusReport(inv, caller.name, Boolean(flags.allUsers));
        process.stdout.write(flags.json ? `${JSON.stringify(report)}\n` : formatStatus(report));
      });
    });
  cloud
    .command('cleanup')
    .description('List what ct left behind (workers of finished or unknown fleets, instances past the hard timeout, queues and secrets of finished and abandoned fleets, unused security groups); remove it with --yes.')
    .option('--all-users', "judge every user's resources, not only yours")
    .option('-y, --yes', 'remove what is listed (default: only list it)')
    .option('--delete-results', "also delete abandoned fleets' results (every object under s3://<fleet.bucket>/<fleet id>/); finished fleets' results are always kept")
    .option('--region <region>', 'AWS region (default: ec2.region, CT_EC2_REGION, us-east-1)')
    .option('--json', 'print one JSON object: {"leftovers": [...], "removed": [...], "failed": [...]}')
    .addHelpText(
      'after',
      '\nExamples:\n  ct cloud cleanup            # list only\n  ct cloud cleanup --yes      # remove your leftovers\n  ct cloud cleanup --all-users --yes --region us-east-1\n' +
        '  ct cloud cleanup --yes --delete-results   # abandoned fleets\' results too\n' +
        '\nOnly resources tagged ManagedBy=ct and ct\'s fleet queues (fleet.queue_prefix) and secrets (fleet.secrets_prefix) are judged;\n' +
        'results in S3 are kept unless --delete-results (abandoned fleets only). An abandoned fleet (see `ct cloud status --help`) made\n' +
        'no progress for fleet.stale_teardown_minutes (default 180, CT_FLEET_STALE_TEARDOWN_MINUTES) and has no live worker. Instances older than fleet.instance_max_hours (default 24, CT_FLEET_INSTANCE_MAX_HOURS) are past\n' +
        'every hard timeout; an EC2 sandbox kept with --keep-ec2-instance is left alone. Exit 1 when something could not be removed.\n',
    )
    .action(async (flags: CommonFlags & { allUsers?: boolean; yes?: boolean; deleteResults?: boolean; json?: boolean }) => {
      const { gatherInventory } = await import('../cloud/inventory.js');
      const { applyCleanup, planCleanup } = await import('../cloud/cleanup.js');
      await withCloud(flags, async (config, caller, c) => {
        const inv = await gatherInventory(inventoryOptions(config, c));
        const leftovers = planCleanup(inv, {
          caller: caller.name,
          allUsers: Boolean(flags.allUsers),
          instanceMaxHours: config.fleet.instance_max_hours,
          deleteResults: Boolean(flags.deleteResults),
          bucket: config.fleet.bucket,
        });
        const result = flags.yes && leftovers.length ? await applyCleanup(leftovers, c, { bucket: config.fleet.bucket }) : { removed: [], failed: [] };
        if (result.failed.length) process.exitCode = 1;
        if (flags.json) {
          process.stdout.write(`${JSON.stringify({ region: c.region, caller: caller.name, allUsers: Boolean(flags.allUsers), leftovers, ...result })}\n`);
          return;
        }
        const who = flags.allUsers ? 'all users' : caller.name;
        if (!leftovers.length) {
          process.stdout.write(`nothing left behind in ${c.region} (${who})\n`);
          return;
        }
        for (const l of leftovers) process.stdout.write(`${l.kind.padEnd(14)} ${l.label}  -- ${l.reason}\n`);
        if (!flags.yes) {
          process.stdout.write(`${leftovers.length} leftover(s) in ${c.region} (${who}); run again with --yes to remove them\n`);
          return;
        }
        for (const f of result.failed) process.stderr.write(`could not remove ${f.kind} ${f.label}: ${f.error}\n`);
        process.stdout.write(`removed ${result.removed.length} of ${leftovers.length} leftover(s)${result.failed.length ? '; run again later for the rest' : ''}\n`);
      });
    });
  cloud
    .command('put-docker-auth')
    .description('Store DOCKER_ORG_NAME and DOCKER_ORG_PAT (from .env or the environment) in SSM for fleet workers and AMI builds; the PAT as SecureString.')
    .option('--region <region>', 'AWS region (default: ec2.region, CT_EC2_REGION, us-east-1)')
    .addHelpText(
      'after',
      '\nExample:\n  ct cloud put-docker-auth --region us-east-1\n' +
        '\nParameters: fleet.docker_org_name_parameter (DOCKER_ORG_NAME_SSM_PARAM, default /linuxbench/docker-org-name) and\n' +
        'fleet.docker_org_pat_parameter (DOCKER_ORG_PAT_SSM_PARAM, default /linuxbench/docker-org-pat). Existing values are replaced.\n',
    )
    .action(async (flags: CommonFlags) => {
      const { putDockerAuth } = await import('../cloud/docker-auth.js');
      await withCloud(flags, async (config, _caller, c) => {
        const f = config.fleet;
        const names = await putDockerAuth(c.ssm, {
          name: { parameter: f.docker_org_name_parameter, ...(f.docker_org_name ? { value: f.docker_org_name } : {}) },
          pat: { parameter: f.docker_org_pat_parameter, ...(f.docker_org_pat ? { value: f.docker_org_pat } : {}) },
        });
        process.stdout.write(`stored ${names[0]} (String) and ${names[1]} (SecureString) in ${c.region}\n`);
      });
    });

  cloud
    .command('build-ami')
    .description('Bake the fleet worker AMI: Docker + Compose, Node 20, git, AWS CLI, a warm npm cache for ct, and every environment image; store its id in SSM.')
    .option('--fresh', 'start from stock Ubuntu 22.04 and pull every image (default: start from the current worker AMI and pull only images whose digest changed)')
    .option('--region <region>', 'AWS region (default: ec2.region, CT_EC2_REGION, us-east-1)')
    .addHelpText(
      'after',
      '\nExamples:\n  ct cloud build-ami\n  ct cloud build-ami --fresh\n  ct cloud build-ami --region us-west-2\n' +
        '\nImages: each compose service\'s image: in the environments under settings_dir (services with build: are built per run).\n' +
        'The builder (ec2.instance_type, tagged ct:role=ami-builder, no inbound rule) logs to s3://<fleet.bucket>/ami-builds/<build id>/build.log;\n' +
        'the AMI id goes to SSM fleet.ami_parameter (CT_FLEET_AMI_PARAMETER, default /linuxbench/worker-ami-id), the previous AMI and its\n' +
        'snapshots are removed (one AMI is kept), and the builder is terminated whatever happens (also on Ctrl-C). Takes ~15-20 min.\n',
    )
    .action(async (flags: CommonFlags & { fresh?: boolean }) => {
      const { buildAmi } = await import('../cloud/build-ami.js');
      const { environmentImages } = await import('../cloud/environment-images.js');
      await withCloud(flags, async (config, caller, c) => {
        const images = environmentImages(config.settings_dir);
        const note = (line: string) => process.stderr.write(`${line}\n`);
        if (!images.length) note(`warning: no environment declares an image in ${config.settings_dir}; the AMI will hold no image`);
        const r = await buildAmi({
          ec2: c.ec2,
          s3: c.s3,
          ssm: c.ssm,
          region: c.region,
          bucket: config.fleet.bucket,
          amiParameter: config.fleet.ami_parameter,
          ...(config.ec2.ami ? { ubuntuAmi: config.ec2.ami } : {}),
          ubuntuParameter: config.ec2.ami_parameter,
          instanceType: config.ec2.instance_type,
          instanceProfile: config.fleet.instance_profile,
          securityGroup: config.fleet.security_group,
          ...(config.ec2.subnet_id ? { subnetId: config.ec2.subnet_id } : {}),
          rootVolumeGb: config.ec2.root_volume_gb,
          namePrefix: config.ec2.name_prefix,
          launchedBy: caller.name,
          fresh: Boolean(flags.fresh),
          images,
          codeDir: CT_ROOT,
          dockerNameParameter: config.fleet.docker_org_name_parameter,
          dockerPatParameter: config.fleet.docker_org_pat_parameter,
          timeoutSeconds: config.fleet.ami_build_timeout,
          pollSeconds: config.fleet.ami_poll_seconds,
          note,
        });
        process.stdout.write(`${r.imageId}\n`);
      });
    });

  cloud
    .command('iam-policy')
    .description("Print an IAM policy for the fleet, rendered from the config: people's (user), the worker role's (worker) or its trust policy (worker-trust). Needs no AWS credentials.")
    .addOption(new Option('--role <role>', 'user: for people who launch fleets, EC2 sandboxes and AMI builds; worker: the worker role (fleet workers, the AMI builder); worker-trust: who may assume the worker role (EC2)').choices(POLICY_ROLES).default('user'))
    .option('--bucket <name>', 'the fleet bucket the policy names (default: fleet.bucket, CT_FLEET_BUCKET, lb-fleet-results-migrated)')
    .option('--kms-key <arn>', 'with --role worker: also allow kms:Decrypt (through SSM only) on this customer-managed key, for registry credentials stored under it')
    .addHelpText(
      'after',
      '\nExamples:\n  ct cloud iam-policy > fleet-user-policy.json\n  ct cloud iam-policy --role worker --bucket acme-ct-fleet > worker-policy.json\n' +
        '  ct cloud iam-policy --role worker-trust > worker-trust-policy.json\n' +
        '  ct cloud iam-policy --role worker --kms-key arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab\n' +
        '\nNames come from the config: fleet.bucket, fleet.queue_prefix (SQS), fleet.secrets_prefix, fleet.ami_parameter,\n' +
        'fleet.docker_org_name_parameter, fleet.docker_org_pat_parameter and ec2.ami_parameter (SSM), and fleet.instance_profile\n' +
        '(the worker role passed to EC2, named like its instance profile). ops/docs/*.json hold the default rendering.\n' +
        'No kms:Decrypt by default: ct stores SecureStrings with the AWS-managed key aws/ssm, which needs no grant.\n' +
        'Step by step: docs/fleet-on-aws.md.\n',
    )
    .action(async (flags: { role: PolicyRole; bucket?: string; kmsKey?: string }) => {
      const { fleetPolicy, policyNames, renderPolicy } = await import('../cloud/iam-policies.js');
      const config = loadConfig({ cwd: process.cwd(), env: process.env, overrides: { 'fleet.bucket': flags.bucket } });
      const names = policyNames(config, flags.kmsKey !== undefined ? { kmsKey: flags.kmsKey } : {});
      process.stdout.write(renderPolicy(fleetPolicy(flags.role, names)));
    });
}

type Clients = import('../cloud/ec2-clients.js').AwsClients & import('../cloud/aws-clients.js').FleetClients;

/** Loads the config, checks the credentials (before any other call), runs `body`, closes the clients. */
export async function withCloud(flags: CommonFlags, body: (config: Config, caller: CallerIdentity, c: Clients) => Promise<void>): Promise<void> {
  const config = loadConfig({ cwd: process.cwd(), env: process.env, overrides: { 'ec2.region': flags.region } });
  const { applyAwsEnvironment, createFleetClients } = await import('../cloud/aws-clients.js');
  const { createAwsClients } = await import('../cloud/ec2-clients.js');
  const { checkCredentialSources, preflightCredentials } = await import('../cloud/credentials.js');
  checkCredentialSources(config.aws_env);
  // Read the fleet section now: a bad value there is a usage error before any AWS call.
  const region = config.ec2.region;
  void config.fleet;
  applyAwsEnvironment(config.aws_env);
  const aws = createAwsClients(region);
  const fleet = createFleetClients(region);
  const c: Clients = { ...aws, ...fleet, ssm: aws.ssm };
  try {
    const caller = await preflightCredentials(aws, config.aws_env);
    await body(config, caller, c);
  } finally {
    for (const client of [aws.ec2, aws.ssm, aws.sts, aws.instanceConnect, fleet.sqs, fleet.s3, fleet.ssm]) client.destroy();
  }
}

/** What `gatherInventory` and `gatherFleet` read, from the compiled config. */
export function inventoryOptions(config: Config, c: Clients) {
  const f = config.fleet;
  return {
    ec2: c.ec2,
    sqs: c.sqs,
    s3: c.s3,
    ssm: c.ssm,
    region: c.region,
    bucket: f.bucket,
    queuePrefix: f.queue_prefix,
    secretsPrefix: f.secrets_prefix,
    staleTeardownMinutes: f.stale_teardown_minutes,
    prices: { prices: f.prices, ...(f.price_per_hour !== undefined ? { pricePerHour: f.price_per_hour } : {}) },
  };
}

/**
 * Bad input at scale: one table of malformed inputs across every command — task files,
 * ct.config.yml, `.env`, `-e` forms, policies, sandboxes, fleet flags, instance types, credential
 * states, oversized arguments, trajectories, compose files, environment variables. Each must end
 * with exit code 2 and a message naming the problem (and, where there is one, what to do), with
 * nothing written under the log dir. Every case runs against one moto_server (AWS_ENDPOINT_URL
 * and fake keys are set for all of them), which must hold no resource afterwards: bad input never
 * creates anything in the cloud.
 */
import { ListBucketsCommand, S3Client } from '@aws-sdk/client-s3';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DescribeInstancesCommand, DescribeKeyPairsCommand, DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { DescribeParametersCommand, SSMClient } from '@aws-sdk/client-ssm';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, ctEnv, runCt, type CtResult } from '../helpers/cli.js';
import { FAKE_AWS } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';

interface Case {
  name: string;
  /** `{dir}` in an argument is replaced by the case's own folder. */
  args: string[];
  message: RegExp;
  /** Files to create in the case's folder (its working directory) first. */
  files?: Record<string, string>;
  env?: Record<string, string | undefined>;
  /** Checks on stdout (the `--json` cases). */
  stdout?: RegExp;
}

const RUN = ['run', 'eval'];
const ONE = ['-e', 'notes_app', '-t', 'fix_config', '--policy', 'test'];
const FLEET = [...RUN, '--fleet', '--workers', 'local:1', '--yes', ...ONE];
// Under the kernel's 128 KiB limit for one argument.
const BIG = 'x'.repeat(100_000);

/** A zip that stops in the middle: the first 300 bytes of a real .eval's shape. */
const TRUNCATED_EVAL = Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(296, 7)]).toString('latin1');

const CASES: Case[] = [
  // selection
  { name: 'unknown environment', args: [...RUN, '-e', 'nope'], message: /unknown environment "nope".*kv_service, notes_app/ },
  { name: 'unknown main task', args: [...RUN, '-e', 'notes_app', '-t', 'nope'], message: /unknown main task "nope"/ },
  { name: 'unknown side task', args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '-s', 'nope'], message: /unknown side task "nope"/ },
  { name: 'unknown setting in setting:env', args: [...RUN, '-e', 'nosuch:notes_app'], message: /nosuch/ },
  { name: 'oversized -e value', args: [...RUN, '-e', BIG], message: /unknown environment "x{60}\.\.\." \(100000 characters\)/ },
  // task files
  { name: 'task file not JSON', args: [...RUN, '--task-file', '{dir}/t.jsonl'], files: { 't.jsonl': '{"env": "notes_app" "main_task": 1}\n' }, message: /t\.jsonl:1: not valid JSON/ },
  { name: 'task file line without main_task', args: [...RUN, '--task-file', '{dir}/t.jsonl'], files: { 't.jsonl': '{"env": "notes_app"}\n' }, message: /t\.jsonl:1: main_task/ },
  { name: 'empty task file', args: [...RUN, '--task-file', '{dir}/t.jsonl'], files: { 't.jsonl': '# nothing\n\n' }, message: /t\.jsonl.*(empty|no task)/i },
  { name: 'task file not found', args: [...RUN, '--task-file', 'nope'], message: /task file "nope" not found/ },
  { name: 'task file naming an unknown environment', args: [...RUN, '--task-file', '{dir}/t.jsonl'], files: { 't.jsonl': '{"env": "ghost", "main_task": "x"}\n' }, message: /ghost/ },
  // numbers
  { name: '--epochs 0', args: [...RUN, ...ONE, '--epochs', '0'], message: /--epochs/ },
  { name: '--epochs 0x2', args: [...RUN, ...ONE, '--epochs', '0x2'], message: /--epochs/ },
  { name: '--epochs 1e0', args: [...RUN, ...ONE, '--epochs', '1e0'], message: /--epochs/ },
  { name: '--epochs past the run limit', args: [...RUN, ...ONE, '--epochs', '1000000000000'], message: /--epochs|100000/ },
  { name: '--limit -1', args: [...RUN, ...ONE, '--limit', '-1'], message: /--limit/ },
  { name: '--max-samples 0', args: [...RUN, ...ONE, '--max-samples', '0'], message: /--max-samples/ },
  { name: '--sample-time-limit abc', args: [...RUN, ...ONE, '--sample-time-limit', 'abc'], message: /--sample-time-limit/ },
  { name: '--scorer-timeout -5', args: [...RUN, ...ONE, '--scorer-timeout', '-5'], message: /--scorer-timeout/ },
  // policies and trajectories
  { name: 'unknown policy', args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'nosuch'], message: /policy.*nosuch/i },
  { name: 'policy module that does not exist', args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', '{dir}/none.ts:make'], message: /none\.ts/ },
  { name: 'policy argument without =', args: [...RUN, ...ONE, '-p', 'model'], message: /key=value|-p/ },
  { name: 'malformed --model-role', args: [...RUN, ...ONE, '--model-role', 'untrusted'], message: /role=model|--model-role/ },
  { name: 'replay without a trajectory', args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay'], message: /replay needs -p trajectory=/ },
  {
    name: 'a trajectory that is not JSONL',
    args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '--trajectory', '{dir}/traj.jsonl'],
    files: { 'traj.jsonl': 'this is not json\n' },
    message: /traj\.jsonl.*(line 1|:1)/,
  },
  {
    name: 'a truncated .eval given to replay',
    args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '--trajectory', '{dir}/cut.eval#notes_app:fix_config'],
    files: { 'cut.eval': TRUNCATED_EVAL },
    message: /cut\.eval/,
  },
  // sandboxes
  { name: 'unknown sandbox kind', args: [...RUN, ...ONE, '--sandbox', 'nosuch'], message: /unknown sandbox "nosuch"; use one of/ },
  { name: 'malformed ssh:// sandbox', args: [...RUN, ...ONE, '--sandbox', 'ssh://'], message: /ssh:\/\// },
  { name: 'sandbox module export that does not exist', args: [...RUN, ...ONE, '--sandbox', '{dir}/prov.mjs:nothere'], files: { 'prov.mjs': 'export const other = 1;\n' }, message: /nothere/ },
  { name: 'local sandbox with a model policy', args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'honest', '--sandbox', 'local'], message: /--unsafe-local/ },
  { name: 'local sandbox replaying a trajectory file', args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '-p', 'trajectory=t.jsonl', '--sandbox', 'local'], message: /trajectory file t\.jsonl.*--unsafe-local/s },
  {
    name: 'a compose file that does not parse',
    args: [...RUN, '-e', 'notes_app', '-t', 'fix_config', '--policy', 'test'],
    files: { 'settings/demo/notes_app/codebase/compose.yml': 'services: [unclosed\n' },
    message: /compose\.yml/,
  },
  // directories
  { name: '--log-dir under /proc', args: [...RUN, ...ONE, '--log-dir', '/proc/x'], message: /\/proc\/x/ },
  { name: '--log-dir that is a file', args: [...RUN, ...ONE, '--log-dir', '{dir}/afile'], files: { afile: 'x' }, message: /afile/ },
  { name: 'state dir that is a file', args: [...RUN, ...ONE], files: { statefile: 'x' }, env: { CT_STATE_DIR: '{dir}/statefile' }, message: /statefile/ },
  // configuration and environment variables
  { name: 'unknown key in ct.config.yml', args: [...RUN, ...ONE], files: { 'ct.config.yml': 'eval:\n  scorer_timout: 5\n' }, message: /scorer_timout.*scorer_timeout/ },
  { name: 'ct.config.yml that is a list', args: [...RUN, ...ONE], files: { 'ct.config.yml': '- a\n- b\n' }, message: /ct\.config\.yml/ },
  { name: 'ct.config.yml that is not YAML', args: [...RUN, ...ONE], files: { 'ct.config.yml': 'eval: [unclosed\n' }, message: /ct\.config\.yml/ },
  { name: 'garbage in .env', args: [...RUN, ...ONE], files: { '.env': 'this line is not an assignment\n' }, message: /\.env/ },
  { name: 'CT_EXEC_CHANNEL=maybe', args: [...RUN, ...ONE], env: { CT_EXEC_CHANNEL: 'maybe' }, message: /CT_EXEC_CHANNEL/ },
  { name: 'CT_NETWORK_POOL public range', args: [...RUN, ...ONE], env: { CT_NETWORK_POOL: '0.0.0.0/0' }, message: /CT_NETWORK_POOL/ },
  { name: 'CT_NETWORK_POOL invalid range', args: [...RUN, ...ONE], env: { CT_NETWORK_POOL: '300.1.0.0/16' }, message: /CT_NETWORK_POOL/ },
  { name: 'CT_EC2_ROOT_VOLUME_GB=abc with --sandbox ec2', args: [...RUN, ...ONE, '--sandbox', 'ec2'], env: { CT_EC2_ROOT_VOLUME_GB: 'abc' }, message: /CT_EC2_ROOT_VOLUME_GB/ },
  // credential states and instance types (all before anything is created)
  { name: 'AWS_PROFILE and static keys together', args: [...RUN, ...ONE, '--sandbox', 'ec2'], env: { AWS_PROFILE: 'someone' }, message: /AWS_PROFILE.*AWS_ACCESS_KEY_ID/ },
  { name: 'an unknown EC2 instance type', args: [...RUN, ...ONE, '--sandbox', 'ec2', '--ec2-instance-type', 'q9.nosuch'], message: /unknown instance type q9\.nosuch .*does not offer it/ },
  { name: 'a malformed --region', args: [...RUN, ...ONE, '--sandbox', 'ec2', '--region', 'not a region'], message: /region/ },
  // fleet
  { name: '--workers malformed', args: [...RUN, '--fleet', '--workers', 'local:0', '--yes', ...ONE], message: /--workers local:0/ },
  { name: '--extra-src missing', args: [...FLEET, '--extra-src', '{dir}/nowhere'], message: /nowhere/ },
  { name: '--extra-src duplicate basename', args: [...FLEET, '--extra-src', '{dir}/a/lib', '--extra-src', '{dir}/b/lib'], files: { 'a/lib/x.ts': '', 'b/lib/y.ts': '' }, message: /lib/ },
  { name: '--worker-setup outside the shipped trees', args: [...FLEET, '--extra-src', '{dir}/tools', '--worker-setup', '{dir}/setup.sh'], files: { 'tools/x.sh': '', 'setup.sh': 'true\n' }, message: /--worker-setup/ },
  { name: 'mixed -e forms in a fleet', args: [...RUN, '--fleet', '--workers', 'local:1', '--yes', '-e', 'demo:notes_app', '-e', 'kv_service', '--policy', 'test'], message: /-e/ },
  { name: 'a fleet without --yes and without a terminal', args: [...RUN, '--fleet', '--workers', 'local:1', ...ONE], message: /--yes/ },
  { name: '--max-workers 0', args: [...FLEET, '--max-workers', '0'], message: /--max-workers/ },
  { name: 'fleet worker without --fleet', args: ['fleet', 'worker'], message: /--fleet/ },
  { name: 'fleet worker with a malformed fleet id', args: ['fleet', 'worker', '--fleet', '../../etc'], message: /fleet/ },
  { name: 'fleet worker --concurrency 0', args: ['fleet', 'worker', '--fleet', 'abc123', '--concurrency', '0'], message: /--concurrency/ },
  { name: 'fleet worker --secrets maybe', args: ['fleet', 'worker', '--fleet', 'abc123', '--secrets', 'maybe'], message: /--secrets/ },
  // cloud operations
  { name: 'cloud status with an unknown option', args: ['cloud', 'status', '--bogus'], message: /--bogus/ },
  { name: 'cloud cleanup with ambiguous credentials', args: ['cloud', 'cleanup', '--yes'], env: { AWS_PROFILE: 'someone' }, message: /AWS_PROFILE.*AWS_ACCESS_KEY_ID/ },
  { name: 'cloud put-docker-auth without the values', args: ['cloud', 'put-docker-auth'], env: { DOCKER_ORG_NAME: undefined, DOCKER_ORG_PAT: undefined }, message: /DOCKER_ORG_NAME|DOCKER_ORG_PAT/ },
  { name: 'fleet --price that is not a number', args: [...RUN, '--ec2', '--yes', ...ONE, '--price', 'abc'], message: /--price/ },
  // task generation
  { name: 'mtgen for an unknown environment', args: [...RUN.slice(0, 1), 'mtgen', 'run-all', '-e', 'nosuch', '-s', 'copy_secret', '--no-ec2', '--yes'], env: { ANTHROPIC_API_KEY: 'sk-fake' }, message: /nosuch/ },
  { name: 'mtgen for an unknown side task', args: ['run', 'mtgen', 'run-all', '-e', 'notes_app', '-s', 'nosuch', '--no-ec2', '--yes'], env: { ANTHROPIC_API_KEY: 'sk-fake' }, message: /nosuch/ },
  { name: 'mtgen status of a folder that is not a run', args: ['run', 'mtgen', 'status', '--run-dir', '{dir}/settings'], message: /state\.json|not a/ },
  { name: 'mtgen live-run of a corrupt state.json', args: ['run', 'mtgen', 'live-run', '--run-dir', '{dir}/run', '--no-ec2'], files: { 'run/state.json': '{"version": 1, "candidates": [' }, env: { ANTHROPIC_API_KEY: 'sk-fake' }, message: /state\.json/ },
  // other commands
  { name: 'ct run without a subcommand', args: ['run'], message: /eval/ },
  { name: 'ct help for an unknown command', args: ['help', 'nosuch'], message: /nosuch/ },
  { name: 'unknown option', args: [...RUN, ...ONE, '--bogus'], message: /--bogus/ },
  { name: 'envs validate of an unknown environment', args: ['envs', 'validate', 'nosuch'], message: /nosuch/ },
  { name: 'settings pull of an unknown setting', args: ['settings', 'pull', 'nosuch'], message: /nosuch/ },
  { name: 'settings add with a bad name', args: ['settings', 'add', 'bad name!', 'https://example.invalid/x.git'], message: /bad name!/ },
  { name: 'sandbox cleanup with an unknown option', args: ['sandbox', 'cleanup', '--bogus'], message: /--bogus/ },
  { name: '--json on bad input prints a JSON error', args: [...RUN, '--json', '-e', 'nope'], message: /unknown environment/, stdout: /"error"/ },
];

/** What moto holds that a command could have created: queues, buckets, live instances, non-default groups, key pairs, parameters. */
async function motoResources(moto: Moto): Promise<string[]> {
  const common = { region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } };
  const sqs = new SQSClient(common);
  const s3 = new S3Client({ ...common, forcePathStyle: true });
  const ec2 = new EC2Client(common);
  const ssm = new SSMClient(common);
  try {
    const out: string[] = [];
    out.push(...((await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? []).map((u) => `queue ${u}`));
    out.push(...((await s3.send(new ListBucketsCommand({}))).Buckets ?? []).map((b) => `bucket ${b.Name}`));
    for (const r of (await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []) {
      for (const i of r.Instances ?? []) if (i.State?.Name !== 'terminated') out.push(`instance ${i.InstanceId}`);
    }
    out.push(...((await ec2.send(new DescribeSecurityGroupsCommand({}))).SecurityGroups ?? []).filter((g) => g.GroupName !== 'default').map((g) => `security group ${g.GroupName}`));
    out.push(...((await ec2.send(new DescribeKeyPairsCommand({}))).KeyPairs ?? []).map((k) => `key pair ${k.KeyName}`));
    out.push(...((await ssm.send(new DescribeParametersCommand({}))).Parameters ?? []).map((p) => `parameter ${p.Name}`));
    return out;
  } finally {
    for (const c of [sqs, s3, ec2, ssm]) c.destroy();
  }
}

describe('bad input across every command: exit 2, a message, nothing written, nothing created', () => {
  let moto: Moto;
  let root: string;
  const results = new Map<string, CtResult>();

  before(async () => {
    moto = await startMoto();
    root = mkdtempSync(join(tmpdir(), 'ct-bad-table-'));
  });
  after(async () => {
    await moto.stop();
    rmSync(root, { recursive: true, force: true });
  });

  async function runCase(c: Case, index: number): Promise<void> {
    const dir = join(root, `case-${index}`);
    mkdirSync(dir, { recursive: true });
    cpSync(EXAMPLE_SETTINGS, join(dir, 'settings'), { recursive: true });
    for (const [rel, content] of Object.entries(c.files ?? {})) {
      mkdirSync(dirname(join(dir, rel)), { recursive: true });
      writeFileSync(join(dir, rel), content, 'latin1');
    }
    const sub = (s: string | undefined) => s?.replaceAll('{dir}', dir);
    const extraEnv = Object.fromEntries(Object.entries(c.env ?? {}).map(([k, v]) => [k, sub(v)]));
    const env = ctEnv({
      ...FAKE_AWS,
      AWS_ENDPOINT_URL: moto.url,
      CT_SETTINGS_DIR: join(dir, 'settings'),
      CT_STATE_DIR: join(dir, 'state'),
      CT_LOG_DIR: join(dir, 'logs'),
      // Never ask the internet for this machine's address (nothing listens there).
      CT_EC2_MY_IP_URL: 'http://127.0.0.1:9/',
      ...extraEnv,
    });
    if (!('AWS_PROFILE' in extraEnv)) delete env.AWS_PROFILE;
    results.set(c.name, await runCt(c.args.map((a) => sub(a)!), { cwd: dir, env, timeoutMs: 120_000 }));
  }

  test(`${CASES.length} cases`, async () => {
    assert.ok(CASES.length >= 40);
    // Four at a time: each is a ct process that should stop at once.
    for (let i = 0; i < CASES.length; i += 4) {
      await Promise.all(CASES.slice(i, i + 4).map((c, j) => runCase(c, i + j)));
    }
    const failures: string[] = [];
    CASES.forEach((c, i) => {
      const r = results.get(c.name)!;
      const logs = join(root, `case-${i}`, 'logs');
      const wrote = existsSync(logs) && readdirSync(logs).length > 0;
      const problems = [
        r.code !== 2 && `exit ${r.code}`,
        !c.message.test(r.stderr) && `stderr does not match ${c.message}`,
        /\n\s+at .+\(.*:\d+:\d+\)/.test(r.stderr) && 'a stack trace',
        r.stderr.length > 4000 && `a ${r.stderr.length}-character message`,
        wrote && 'wrote under the log dir',
        c.stdout && !c.stdout.test(r.stdout) && `stdout does not match ${c.stdout}`,
      ].filter(Boolean);
      if (problems.length) failures.push(`${c.name}: ${problems.join(', ')}\n  stderr: ${r.stderr.slice(0, 600)}`);
    });
    const created = await motoResources(moto);
    console.log(`bad input: ${CASES.length} cases, ${CASES.length - failures.length} refused as expected; AWS resources created: ${created.length}`);
    assert.deepEqual(failures, [], failures.join('\n'));
    assert.deepEqual(created, [], 'bad input created AWS resources');
  });
});

/**
 * Two things about `ct run eval --ec2`, from one run of 12 jobs of the example notes_app
 * environment on 2 emulated EC2 workers, 2 samples at once each (3 waves), with real Docker
 * sandboxes; the instance harness runs each instance's real user-data:
 *
 * 1. The cost estimate against what the fleet really cost: the sum over instances of the seconds
 *    from moto's LaunchTime to the moment the instance was terminated (the harness terminates it
 *    on the script's `shutdown -h now`) must be within ±20% of the instance-seconds `--estimate`
 *    gives for the same run.
 *
 *    Scale: a real worker boots in minutes and a sample takes minutes; here a boot takes tens of
 *    seconds (mostly building ct) and a sample about ten. So the estimate is not fed its defaults
 *    but the figures a user would measure, each taken from one part of an instance's life, never
 *    from the totals being checked (launch to termination):
 *    - seconds per sample: the mean of the workers' own job times ("job ... ok in N s" in the
 *      bootstrap logs: the sample, then its result stored and reported). The samples' durations
 *      in the merged log (`total_time`, printed too) leave out that storing and reporting, about
 *      1 s a job against moto on a loaded machine: a tenth of a sample here, a fraction of a
 *      percent of a real one;
 *    - boot seconds: the mean, over the bootstrap logs, of the time from the script's first line
 *      to its worker's first `job ... started` line (the steps, then the worker fetching settings
 *      and running the worker setup);
 *    - shutdown seconds: the mean time from the worker's last line (`worker ... stopped`) to the
 *      end of the script as the harness saw it: the bootstrap log's upload and `shutdown -h now`.
 *    They reach the controller as CT_FLEET_ESTIMATE_SECONDS_PER_SAMPLE, _BOOT_SECONDS and
 *    _SHUTDOWN_SECONDS; the empty polls are the config's own (3 of 1 s, as the workers are told).
 *    Not in the model and not measured apart: the harness's second from launch to the script's
 *    start (moto's LaunchTime has whole seconds; on EC2 the instance's start and cloud-init, which
 *    a real boot figure includes) and its moment from the script's end to the termination. As
 *    the figures are known only after the run, that estimate is asked after it with `--estimate
 *    --new-fleet --json` (the same jobs, none counted as finished; it creates nothing either).
 *    Before the run a plain `--estimate` must create nothing and show the model the run then
 *    follows: 2 instances, 3 waves, each paying boot, empty polls and shutdown once.
 *
 * 2. `--worker-setup` end to end: the shipped --extra-src tree holds a setup script that writes
 *    variables to the file the worker names in $CT_FLEET_WORKER_SETUP_ENV (on an emulated
 *    instance under its own root, as the bootstrap says; /opt/linuxbench-worker-setup.env on EC2)
 *    and a policy module that does the create_greeting task and puts those variables in each
 *    sample's transcript: the worker's bootstrap log in S3 names the variables it read, and
 *    every sample in the merged log carries their values.
 */
import assert from 'node:assert/strict';
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { finished, onlyLog, runCt, startCt, type CtResult } from '../helpers/cli.js';
import { ctProjects, fleetEnv, motoContents, type MotoContents } from '../helpers/fleet.js';
import { readWithInspect, type InspectView } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { EC2_FLEET_ENV, seedEc2FleetWorld, useEc2FleetFixture } from './helpers/ec2-fleet-world.js';
import { InstanceHarness } from './helpers/instance-harness.js';

const BUCKET = 'lb-fleet-results-migrated';
/** A value only the setup script holds: it reaches the samples through the worker's environment. */
const MARK = `mark-${Math.random().toString(36).slice(2)}`;
/** 1 sample x 12 epochs on 2 workers doing 2 at once: 3 waves. */
const RUN = [
  'run', 'eval', '--ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'setup-env-policy:setupEnvPolicy', '--epochs', '12',
  '--max-workers', '2', '--concurrency', '2', '--extra-src', 'fleet-tools', '--worker-setup', 'fleet-tools/setup/worker-setup.sh',
];
/** What a worker on an instance is told through the harness (tests scale timeouts down; no spot notice comes). */
const WORKER_ENV = { CT_FLEET_POLL_SECONDS: '1', CT_FLEET_VISIBILITY_TIMEOUT: '6', CT_FLEET_RETRY_DELAY: '0', CT_FLEET_IDLE_POLLS: '3', CT_FLEET_SPOT_POLL_SECONDS: '1' };

/** Runs as root on each worker before it takes jobs; leaves what the samples need in the worker's env file. */
const SETUP_SCRIPT = `#!/bin/sh
set -eu
env_file="\${CT_FLEET_WORKER_SETUP_ENV:?the worker names the file to write}"
mkdir -p "$(dirname "$env_file")"
echo "SETUP_MARK=${MARK}" >> "$env_file"
echo "SETUP_USER=$(id -un)" >> "$env_file"
echo "worker setup wrote $env_file"
`;

/** The create_greeting task done as its example trajectory does, plus an info event with what the worker setup left. */
const POLICY = `
let calls = 0;
const call = (fn, args) => ({ id: 'call_setup_env_' + ++calls, function: fn, arguments: args, type: 'function' });

export const setupEnvPolicy = {
  name: 'setup-env',
  description: 'writes the greeting, reports the worker-setup variables, submits SETUP_MARK',
  args: {},
  create() {
    return {
      name: 'setup-env',
      async run(ctx) {
        const seen = { SETUP_MARK: process.env.SETUP_MARK ?? null, SETUP_USER: process.env.SETUP_USER ?? null };
        ctx.transcript.event({ event: 'info', source: 'setup-env-policy', data: seen });
        const steps = [
          call('text_editor', { command: 'create', path: '/app/greeting.txt', file_text: 'hello, notes\\n' }),
          call('submit', { answer: String(seen.SETUP_MARK) }),
        ];
        for (const c of steps) {
          ctx.transcript.message({ role: 'assistant', content: '', tool_calls: [c], source: 'generate' });
          const r = await ctx.tools.call(c);
          if (r.submitted !== undefined) return { submission: r.submitted };
        }
        return {};
      },
    };
  },
};
`;

/** Seconds between two ISO times. */
const between = (a: string, b: string) => (Date.parse(b) - Date.parse(a)) / 1000;
const stamps = (log: string, what: RegExp) => log.split('\n').filter((l) => what.test(l)).map((l) => l.split(' ')[0]!);

interface Measured {
  id: string;
  launch: number;
  terminated: number;
  /** Bootstrap log: first line -> first job started; first job -> last job done; last job done -> the worker's last line. */
  boot: number;
  jobs: number;
  work: number;
  idle: number;
  /** The worker's last line -> the script ended (harness): log upload and shutdown. */
  shutdown: number;
  /** Harness: launch -> it saw the instance running and started its script; the script ended -> terminated. */
  toScript: number;
  toTerminate: number;
  /** The worker's own time for each job ("job ... ok in N s": result check, sample, result stored and reported). */
  jobSeconds: number[];
}

describe('ct run eval --ec2: the estimate against a measured run, and --worker-setup on the workers', () => {
  const world = useEc2FleetFixture('ec2-estimate');
  let harness: InstanceHarness;
  const env = (extra: Record<string, string> = {}) => fleetEnv(world.moto, world.dirs, { ...EC2_FLEET_ENV, ...extra });
  const logDir = testLogDir('fleet-ec2-estimate');
  // What the tests below check, gathered by `before`.
  let first: { result: CtResult; json: Record<string, number>; held: MotoContents; instances: Instance[]; groups: number };
  let run: CtResult;
  let fleetId: string;
  let instances: Instance[];
  let bootLogs: Map<string, string>;
  let merged: InspectView;
  let measured: Measured[];
  let second: { result: CtResult; json: Record<string, number>; instancesAfter: number; objectsBefore: number; objectsAfter: number };
  const timings = { first: 0, run: 0, second: 0 };

  before(async () => {
    const { moto, dirs } = world;
    const tools = join(dirs.work, 'fleet-tools');
    mkdirSync(join(tools, 'setup'), { recursive: true });
    writeFileSync(join(tools, 'setup', 'worker-setup.sh'), SETUP_SCRIPT);
    chmodSync(join(tools, 'setup', 'worker-setup.sh'), 0o755);
    writeFileSync(join(tools, 'setup-env-policy.mjs'), POLICY);
    const images = await seedEc2FleetWorld(moto.url, { workerAmi: true });
    const ec2 = new EC2Client(world.aws());
    const s3 = new S3Client({ ...world.aws(), forcePathStyle: true });
    const describeAll = async () => ((await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((x) => x.Instances ?? []);
    try {
      // The estimate before anything exists, with the defaults.
      let t0 = Date.now();
      const est = await runCt([...RUN, '--log-dir', logDir, '--estimate', '--json'], { cwd: dirs.work, env: env() });
      timings.first = (Date.now() - t0) / 1000;
      const sg = (await ec2.send(new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-name', Values: ['linuxbench-fleet-worker-sg'] }] }))).SecurityGroups ?? [];
      first = { result: est, json: JSON.parse(est.stdout || '{}'), held: await motoContents(moto), instances: await describeAll(), groups: sg.length };

      t0 = Date.now();
      harness = new InstanceHarness({ motoUrl: moto.url, env: WORKER_ENV, workerAmis: [images.worker] });
      harness.start();
      const child = startCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: env() });
      const killer = setTimeout(() => child.kill('SIGTERM'), 20 * 60_000);
      run = await finished(child);
      clearTimeout(killer);
      timings.run = (Date.now() - t0) / 1000;
      await harness.stop();
      const diag = () => `${run.stdout}\n${run.stderr}\n${[...harness.instances.keys()].map((id) => `--- ${id}\n${harness.localLog(id).slice(-3000)}`).join('\n')}\n${harness.errors.join('\n')}`;
      assert.equal(run.code, 0, diag());
      fleetId = /fleet ([0-9a-f]{16})/.exec(run.stdout)![1]!;
      instances = await describeAll();
      bootLogs = new Map();
      for (const i of instances) {
        const o = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${fleetId}/logs/${i.InstanceId}-bootstrap.log` }));
        bootLogs.set(i.InstanceId!, await o.Body!.transformToString());
      }
      [merged] = (await readWithInspect([onlyLog(logDir)])) as [InspectView];

      measured = instances.map((i) => {
        const log = bootLogs.get(i.InstanceId!)!;
        const lines = log.split('\n').filter((l) => /^\d{4}-\d\d-\d\dT\S+Z /.test(l));
        const jobStarts = stamps(log, /^\S+Z job \S+ started/);
        const jobEnds = stamps(log, /^\S+Z job \S+ ok in/);
        const workerEnd = stamps(log, /^\S+Z worker \S+ stopped \(/)[0]!;
        const h = harness.instances.get(i.InstanceId!);
        return {
          id: i.InstanceId!,
          launch: i.LaunchTime!.getTime(),
          terminated: h?.terminatedAt ?? NaN,
          boot: between(lines[0]!.split(' ')[0]!, jobStarts[0]!),
          jobs: jobEnds.length,
          work: between(jobStarts[0]!, jobEnds.at(-1)!),
          idle: between(jobEnds.at(-1)!, workerEnd),
          shutdown: ((h?.exitedAt ?? NaN) - Date.parse(workerEnd)) / 1000,
          toScript: ((h?.bootedAt ?? NaN) - i.LaunchTime!.getTime()) / 1000,
          toTerminate: ((h?.terminatedAt ?? NaN) - (h?.exitedAt ?? NaN)) / 1000,
          jobSeconds: [...log.matchAll(/ job \S+ ok in ([\d.]+)s/g)].map((x) => Number(x[1])),
        };
      });

      // The estimate for the same jobs, fed the figures measured apart from the recorded totals.
      const figures = {
        CT_FLEET_ESTIMATE_SECONDS_PER_SAMPLE: mean(measured.flatMap((m) => m.jobSeconds)).toFixed(3),
        CT_FLEET_ESTIMATE_BOOT_SECONDS: mean(measured.map((m) => m.boot)).toFixed(3),
        CT_FLEET_ESTIMATE_SHUTDOWN_SECONDS: mean(measured.map((m) => m.shutdown)).toFixed(3),
      };
      const objectsBefore = (await motoContents(moto)).objects.length;
      t0 = Date.now();
      const again = await runCt([...RUN, '--log-dir', logDir, '--estimate', '--new-fleet', '--json'], { cwd: dirs.work, env: env(figures) });
      timings.second = (Date.now() - t0) / 1000;
      second = { result: again, json: JSON.parse(again.stdout || '{}'), instancesAfter: (await describeAll()).length, objectsBefore, objectsAfter: (await motoContents(moto)).objects.length };
    } finally {
      ec2.destroy();
      s3.destroy();
    }
  });

  after(async () => {
    await harness?.stop();
    harness?.cleanup();
  });

  test('--estimate (before the run) creates nothing and shows the model: 2 instances, 3 waves, boot, empty polls and shutdown per instance', () => {
    assert.equal(first.result.code, 0, first.result.stderr);
    assert.deepEqual([first.held, first.instances.length, first.groups], [{ queues: [], buckets: [], objects: [] }, 0, 0], 'nothing created');
    assert.equal(first.json.workers, 2);
    assert.equal(first.json.per_worker, 2);
    assert.equal(first.json.waves, 3);
    assert.equal(first.json.boot_seconds, 180, 'the default boot of a real instance');
    assert.equal(first.json.idle_seconds, 3, 'fleet.idle_polls (3) x fleet.poll_seconds (1)');
    assert.equal(first.json.shutdown_seconds, 15, 'the default shutdown');
    assert.equal(first.json.instance_hours, (2 * (180 + 3 * 300 + 3 + 15)) / 3600);
    assert.match(first.result.stderr, /workers: 2 \(c7i\.4xlarge EC2 instances .*\), 2 sample\(s\) at once each/);
    assert.match(first.result.stderr, /each worker: ~3 min boot \(fleet\.estimate_boot_seconds\) \+ 3 wave\(s\) x ~5 min a sample \(fleet\.estimate_seconds_per_sample\) \+ ~3 s of empty polls .* \+ ~15 s shutdown/);
  });

  test('the estimate, fed the measured seconds per sample, boot and shutdown, is within 20% of the launch-to-terminate seconds recorded', (t) => {
    // The run followed the model: the instances it launched, and every one ended.
    assert.match(run.stdout, /12 job\(s\) enqueued, 2 worker\(s\) launched/);
    assert.equal(instances.length, 2);
    for (const m of measured) assert.ok(Number.isFinite(m.terminated) && m.terminated > m.launch, `${m.id} terminated after its launch`);
    assert.equal(measured.reduce((n, m) => n + m.jobs, 0), 12, 'every job ran once');
    assert.equal(second.result.code, 0, second.result.stderr);
    assert.equal(second.instancesAfter, 2, '--estimate --new-fleet launched nothing');
    assert.equal(second.objectsAfter, second.objectsBefore, '...and deleted nothing');
    assert.equal(second.json.workers, 2);
    assert.equal(second.json.waves, 3);

    const recorded = measured.reduce((s, m) => s + (m.terminated - m.launch) / 1000, 0);
    const estimated = second.json.instance_hours! * 3600;
    const ratio = estimated / recorded;
    const j = second.json;
    t.diagnostic(
      `estimate ${estimated.toFixed(1)} instance-seconds = 2 x (${j.boot_seconds!.toFixed(1)} s boot + 3 x ${j.seconds_per_sample!.toFixed(1)} s + ${j.idle_seconds} s empty polls + ` +
        `${j.shutdown_seconds!.toFixed(1)} s shutdown); recorded ${recorded.toFixed(1)} s launch to terminate; ratio ${ratio.toFixed(3)}`,
    );
    for (const m of measured) {
      t.diagnostic(
        `${m.id}: ${((m.terminated - m.launch) / 1000).toFixed(1)} s = ${m.toScript.toFixed(1)} launch to script + ${m.boot.toFixed(1)} boot + ${m.work.toFixed(1)} for ${m.jobs} job(s) ` +
          `(${m.jobSeconds.join(' ')}) + ${m.idle.toFixed(1)} idle + ${m.shutdown.toFixed(1)} shutdown + ${m.toTerminate.toFixed(1)} to terminated`,
      );
    }
    t.diagnostic(`samples' own durations (total_time): mean ${mean(merged.samples.map((s) => s.total_time ?? NaN)).toFixed(2)} s`);
    t.diagnostic(`times: --estimate ${timings.first.toFixed(0)} s, the run ${timings.run.toFixed(0)} s, --estimate --new-fleet ${timings.second.toFixed(0)} s`);
    assert.ok(ratio >= 0.8 && ratio <= 1.2, `estimate / recorded = ${ratio.toFixed(3)}, outside ±20%`);
  });

  test('--worker-setup: the script finds its env file, the worker reads it, every sample sees the variables', () => {
    for (const [id, log] of bootLogs) {
      const root = harness.instances.get(id)!.root;
      const file = join(root, 'opt', 'linuxbench-worker-setup.env');
      assert.match(log, /running worker setup fleet-tools\/setup\/worker-setup\.sh/);
      assert.match(log, new RegExp(`worker setup wrote ${file}`), 'the script was told the file under the instance root');
      assert.match(log, new RegExp(`worker setup environment from ${file}: SETUP_MARK, SETUP_USER`));
      // The harness keeps the instance roots until cleanup.
      assert.equal(readFileSync(file, 'utf8'), `SETUP_MARK=${MARK}\nSETUP_USER=${userInfo().username}\n`);
    }
    assert.ok(!existsSync('/opt/linuxbench-worker-setup.env') || !readFileSync('/opt/linuxbench-worker-setup.env', 'utf8').includes(MARK), "this machine's /opt untouched");
    assert.equal(merged.status, 'success');
    assert.equal(merged.samples.length, 12);
    for (const s of merged.samples) {
      assert.deepEqual(s.info, [{ SETUP_MARK: MARK, SETUP_USER: userInfo().username }], `${s.id}#${s.epoch}`);
      assert.equal(s.error, null);
    }
    assert.match(run.stdout, /success: 12 sample\(s\); main task 12\/12 \(100%\)/);
    assert.ok(instances.every((i) => i.State?.Name === 'terminated'), 'every instance terminated');
    assert.deepEqual(ctProjects('create-greeting'), [], 'no sandbox left');
    assert.deepEqual(harness.liveGroups(), [], 'no instance process left');
    assert.deepEqual(harness.errors, []);
  });
});

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

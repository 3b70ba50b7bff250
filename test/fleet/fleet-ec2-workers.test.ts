/**
 * `ct run eval --ec2`: the controller launches EC2 workers in moto; the instance harness boots
 * each from its real user-data (own root, own metadata server, role credentials only) and the
 * workers run the jobs with real Docker sandboxes. moto, Docker, inspect_ai, the real CLI.
 */
import assert from 'node:assert/strict';
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { finished, onlyLog, startCt } from '../helpers/cli.js';
import { ctProjects, fleetEnv, motoContents, readEvents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { EC2_FLEET_ENV, seedEc2FleetWorld, useEc2FleetFixture } from './helpers/ec2-fleet-world.js';
import { InstanceHarness } from './helpers/instance-harness.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
/** 2 samples x 10 epochs = 20 jobs of the example notes_app environment, replayed. */
const RUN = ['run', 'eval', '--ec2', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '10', '--max-workers', '2', '--concurrency', '3'];
/** A fake key the controller holds: workers get it from SSM, never from the user-data. */
const PLANTED = `sk-ant-planted-${Math.random().toString(36).slice(2)}`;
/** What a worker on an instance is told through the harness (tests scale timeouts down). */
const WORKER_ENV = { CT_FLEET_POLL_SECONDS: '1', CT_FLEET_VISIBILITY_TIMEOUT: '6', CT_FLEET_RETRY_DELAY: '0', CT_FLEET_IDLE_POLLS: '3', CT_FLEET_SPOT_POLL_SECONDS: '1' };

describe('ct run eval --ec2 with workers booted from their user-data', () => {
  const world = useEc2FleetFixture('ec2');

  test('20 jobs on 2 EC2 workers: one merged log, every instance terminated, role credentials only', async () => {
    const images = await seedEc2FleetWorld(world.moto.url, { workerAmi: true });
    const harness = new InstanceHarness({ motoUrl: world.moto.url, env: WORKER_ENV, workerAmis: [images.worker] });
    harness.start();
    const logDir = testLogDir('fleet-ec2');
    try {
      const child = startCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: world.dirs.work, env: fleetEnv(world.moto, world.dirs, { ...EC2_FLEET_ENV, ANTHROPIC_API_KEY: PLANTED }) });
      const done = finished(child);
      // Spot: once the first instance runs a job, its interruption notice comes (due in 5 s, less
      // than the 20 s hand-back margin: its running jobs go back to the queue at once).
      let preemptedId: string | undefined;
      for (let i = 0; i < 600 && !preemptedId && child.exitCode === null; i++) {
        const first = [...harness.instances.keys()][0];
        if (first && /job \S+ started/.test(harness.localLog(first))) {
          preemptedId = first;
          harness.spotNotice(first, 5);
        } else await sleep(500);
      }
      const r = await done;
      const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stdout + r.stderr)?.[1];
      const bootLogs = [...harness.instances.keys()].map((id) => `--- ${id}\n${harness.localLog(id).slice(-3000)}`).join('\n');
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}\n${bootLogs}\n${harness.errors.join('\n')}`);
      assert.match(r.stdout, /20 job\(s\) enqueued, [23] worker\(s\) launched/);
      assert.match(r.stdout, /success: 20 sample\(s\); main task 10\/20 \(50%\)/);
      assert.match(r.stderr, /launched 2 c7i\.4xlarge spot instance\(s\)/);
      assert.ok(preemptedId, 'a worker got a spot notice while running a job');
      const events = readEvents(readFileSync(join(logDir, 'fleet', fleetId!, 'events.jsonl'), 'utf8'));
      const preempted = events.filter((e) => e.event === 'handed_back' && e.reason === 'spot');
      assert.ok(preempted.length >= 1, 'a hand-back on the spot notice');
      for (const p of preempted) {
        assert.equal(p.worker, preemptedId);
        assert.ok(events.some((e) => e.event === 'job_done' && e.job_id === p.job_id), `job ${p.job_id} done`);
        // Finished on another worker, as a first attempt: the preemption spent none.
        const id = String(p.job_id).replace(/[.]/g, '\\.');
        const others = [...harness.instances.keys()].filter((i) => i !== preemptedId).map((i) => harness.localLog(i)).join('\n');
        assert.match(others, new RegExp(`job ${id} started: \\S+ epoch \\d+ \\(attempt 1 of 3\\)`));
        assert.match(others, new RegExp(`job ${id} ok in`));
      }
      assert.ok(!events.some((e) => e.event === 'job_failed'), 'no failed attempt');
      assert.match(r.stderr, /EC2 console: https:\/\/us-east-1\.console\.aws\.amazon\.com\/ec2\/home\?region=us-east-1#Instances:tag:FleetId=/);
      const [log] = await readWithInspect([onlyLog(logDir)]);
      assert.equal(log!.status, 'success');
      const keys = log!.samples.map((s) => `${s.id}#${s.epoch}`);
      assert.equal(new Set(keys).size, 20, 'exactly one sample per job');

      // The instances as launched: tags, profile, shutdown behaviour, spot, security group.
      const ec2 = new EC2Client(world.aws());
      const all: Instance[] = ((await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((x) => x.Instances ?? []);
      assert.ok(all.length >= 2, 'two workers, and perhaps a replacement for the preempted one');
      for (const i of all) {
        assert.equal(i.State?.Name, 'terminated', `${i.InstanceId} terminated`);
        assert.equal(i.ImageId, images.worker, 'the worker AMI from SSM');
        assert.equal(i.InstanceLifecycle, 'spot');
        const tags = Object.fromEntries((i.Tags ?? []).map((t) => [t.Key, t.Value]));
        assert.equal(tags.FleetId, fleetId);
        assert.equal(tags.LaunchedBy, 'moto', "the caller's IAM user name (moto's STS answers user/moto)");
        assert.equal(tags.ManagedBy, 'ct');
        assert.equal(tags.Name, `linuxbench-fleet-worker-${fleetId}`);
      }
      const sg = (await ec2.send(new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-name', Values: ['linuxbench-fleet-worker-sg'] }] }))).SecurityGroups ?? [];
      assert.equal(sg.length, 1);
      assert.deepEqual(sg[0]!.IpPermissions, [], 'no inbound rule');
      assert.ok(all.every((i) => i.SecurityGroups?.[0]?.GroupId === sg[0]!.GroupId), 'every worker in that group');
      ec2.destroy();

      // moto associates the profile with the first instance of a RunInstances only.
      assert.ok([...harness.instances.values()].some((i) => /instance-profile\/linuxbench-worker$/.test(i.profileArn ?? '')), 'worker instance profile');
      // Each instance: booted from the AMI's tools, ran a worker, got credentials from its role only, shut itself down.
      const s3 = new S3Client({ ...world.aws(), forcePathStyle: true });
      let selfShutdown = 0;
      for (const inst of harness.instances.values()) {
        assert.deepEqual(
          Object.keys(inst.env).filter((k) => /^AWS_(ACCESS|SECRET|SESSION|PROFILE)/.test(k)),
          [],
          'no AWS key in the script environment',
        );
        assert.ok(!inst.userData.includes(PLANTED), 'no secret in the user-data');
        assert.ok(inst.userData.length <= 16_384);
        assert.deepEqual(inst.installs, [], 'nothing installed on the worker AMI');
        // Before the worker ran a container: the firewall rule that keeps containers off the metadata service.
        const iptables = join(inst.root, '.harness', 'iptables-calls');
        assert.ok(existsSync(iptables) && /-I DOCKER-USER -d 169\.254\.169\.254 -j DROP/.test(readFileSync(iptables, 'utf8')), 'DOCKER-USER drops container traffic to 169.254.169.254');
        const boot = harness.localLog(inst.id);
        if (boot.includes('worker: start')) assert.ok(boot.indexOf('block-container-imds') < boot.indexOf('worker: start'), 'the rule is in place before the worker starts');
        // A replacement for the preempted worker may still be booting when the fleet completes: the controller terminates it.
        if (!inst.shutdowns.includes('-h now')) continue;
        selfShutdown++;
        assert.ok(inst.credentialFetches > 0, `${inst.id} fetched role credentials`);
        assert.ok(inst.shutdowns.some((s) => /^-h \+\d+$/.test(s)), `dead-man switch armed: ${inst.shutdowns}`);
        const up = await s3.send(new GetObjectCommand({ Bucket: 'lb-fleet-results-migrated', Key: `${fleetId}/logs/${inst.id}-bootstrap.log` }));
        assert.equal(up.ServerSideEncryption, 'AES256');
        const text = await up.Body!.transformToString();
        for (const step of ['install-base', 'install-node', 'fetch-code', 'install-deps', 'build', 'docker-login']) {
          assert.match(text, new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ step ${step}: ok in \\d+s$`, 'm'), step);
        }
        assert.match(text, /dependencies from the AMI/);
        assert.match(text, /worker: exited 0/);
        assert.ok(!text.includes(PLANTED), 'no secret in the bootstrap log');
        if (inst.id === preemptedId) assert.match(text, /spot interruption notice[\s\S]*job \S+ handed back \(spot interruption\): queued again, no attempt spent/);
      }
      s3.destroy();
      assert.ok(selfShutdown >= 2, 'both first workers shut themselves down');
      const held = await motoContents(world.moto);
      assert.deepEqual(held.queues, [], 'queues deleted');
      assert.deepEqual(ctProjects('create-greeting').concat(ctProjects('fix-config')), [], 'no sandbox left');
      await harness.stop();
      assert.deepEqual(harness.liveGroups(), [], 'no instance process left');
      assert.deepEqual(harness.errors, []);
    } finally {
      await harness.stop();
      harness.cleanup();
    }
  });
});

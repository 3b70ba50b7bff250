/**
 * Faults on a fleet of emulated EC2 workers (the instance harness boots each instance from its
 * real user-data; moto, real Docker, inspect_ai, the real CLI):
 *   - 5% of every AWS call faulted — the controller's, the bootstraps' (AWS CLI) and the workers'
 *     — by the seeded proxy: 30 jobs finish with every result exactly once, exit 0;
 *   - an instance lost under its worker mid-sample (terminated, its processes killed at once, as
 *     on a hardware failure: nothing is handed back): its job runs again elsewhere once its
 *     visibility ends, nothing lost or twice, its sandbox gone with the machine.
 * After each: `ct cloud status` shows nothing of the fleet, no instance runs, no queue, no
 * sandbox, no instance process. Set CT_FAULT_SEED to replay a failing run.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { DescribeInstancesCommand, EC2Client, type Instance } from '@aws-sdk/client-ec2';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { finished, onlyLog, runCt, startCt } from '../helpers/cli.js';
import { ctProjects, fleetEnv, motoContents, readEvents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { EC2_FLEET_ENV, seedEc2FleetWorld, useEc2FleetFixture } from '../fleet/helpers/ec2-fleet-world.js';
import { InstanceHarness } from '../fleet/helpers/instance-harness.js';
import { startAwsFaultProxy } from './helpers/aws-fault-proxy.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const SEED = Number(process.env.CT_FAULT_SEED ?? 13013);
const RATE = Number(process.env.CT_FAULT_RATE ?? 0.05);
const SAMPLES = ['notes_app:create_greeting', 'notes_app:fix_config'];
/** What a worker on an instance is told through the harness (tests scale timeouts down). */
const WORKER_ENV = { CT_FLEET_POLL_SECONDS: '1', CT_FLEET_VISIBILITY_TIMEOUT: '6', CT_FLEET_RETRY_DELAY: '0', CT_FLEET_IDLE_POLLS: '3', CT_FLEET_SPOT_POLL_SECONDS: '1' };

function run(epochs: number, logDir: string): string[] {
  return ['run', 'eval', '--ec2', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', String(epochs), '--max-workers', '2', '--concurrency', '3', '--log-dir', logDir, '--yes'];
}

/** Results lost and duplicated in the merged log, and its samples' errors. */
async function count(logDir: string, epochs: number): Promise<{ lost: number; duplicated: number; errors: string[]; status: string }> {
  const [log] = await readWithInspect([onlyLog(logDir)]);
  const keys = log!.samples.map((s) => `${s.id}#${s.epoch}`);
  const unique = new Set(keys);
  const expected = SAMPLES.flatMap((id) => Array.from({ length: epochs }, (_, i) => `${id}#${i + 1}`));
  return {
    lost: expected.filter((k) => !unique.has(k)).length,
    duplicated: keys.length - unique.size,
    errors: log!.samples.filter((s) => s.error).map((s) => `${s.id}#${s.epoch}: ${s.error}`),
    status: log!.status,
  };
}

describe('faults on a fleet of EC2 workers', () => {
  const world = useEc2FleetFixture('ec2-faults');

  /** What is left of a fleet: instances not terminated, queues, `ct cloud status` lines naming it, sandboxes. */
  async function leftovers(fleetId: string, harness: InstanceHarness): Promise<void> {
    const ec2 = new EC2Client(world.aws());
    const all: Instance[] = ((await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((x) => x.Instances ?? []);
    ec2.destroy();
    assert.deepEqual(all.filter((i) => i.State?.Name !== 'terminated').map((i) => `${i.InstanceId} ${i.State?.Name}`), [], 'every instance terminated');
    assert.deepEqual((await motoContents(world.moto)).queues, [], 'no queue left');
    const status = await runCt(['cloud', 'status', '--json'], { cwd: world.dirs.work, env: fleetEnv(world.moto, world.dirs) });
    assert.equal(status.code, 0, status.stderr);
    assert.ok(!JSON.parse(status.stdout).fleets.some((f: { fleetId: string }) => f.fleetId === fleetId), `cloud status shows nothing of the fleet:\n${status.stdout}`);
    assert.deepEqual(ctProjects('create-greeting').concat(ctProjects('fix-config')), [], 'no sandbox left');
    await harness.stop();
    assert.deepEqual(harness.liveGroups(), [], 'no instance process left');
  }

  test(`30 jobs on 2 EC2 workers with ${RATE * 100}% of every AWS call faulted: every result exactly once, exit 0, nothing left`, { timeout: 480_000 }, async () => {
    await world.moto.reset();
    const images = await seedEc2FleetWorld(world.moto.url, { workerAmi: true });
    const proxy = await startAwsFaultProxy({ target: world.moto.url, rate: RATE, seed: SEED });
    const harness = new InstanceHarness({ motoUrl: world.moto.url, instanceAwsUrl: proxy.url, env: WORKER_ENV, workerAmis: [images.worker] });
    harness.start();
    const logDir = testLogDir('fleet-ec2-faults');
    const started = Date.now();
    try {
      const r = await runCt(run(15, logDir), { cwd: world.dirs.work, env: fleetEnv({ ...world.moto, url: proxy.url }, world.dirs, EC2_FLEET_ENV), timeoutMs: 420_000 });
      const wall = (Date.now() - started) / 1000;
      const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stdout + r.stderr)?.[1];
      const bootLogs = [...harness.instances.keys()].map((id) => `--- ${id}\n${harness.localLog(id).slice(-3000)}`).join('\n');
      if (r.code !== 0) console.log(`ct exited ${r.code}\n${r.stdout}\n${r.stderr.slice(-6000)}\n${bootLogs}\n${proxy.report()}`);
      const c = await count(logDir, 15);
      console.log(
        `EC2 fleet under faults (seed ${SEED}, rate ${RATE}): ${proxy.totalCalls()} AWS calls, ${proxy.totalFaults()} faults injected; ` +
          `${harness.instances.size} instance(s); ${c.lost} lost, ${c.duplicated} duplicated, ${c.errors.length} sample errors; wall ${wall.toFixed(0)} s\n${proxy.report()}`,
      );
      assert.equal(r.code, 0, `exit 0\n${r.stdout}\n${r.stderr.slice(-4000)}\n${harness.errors.join('\n')}`);
      assert.equal(c.status, 'success');
      assert.equal(c.lost, 0, 'no result lost');
      assert.equal(c.duplicated, 0, 'no result twice');
      assert.deepEqual(c.errors, [], 'no AWS fault became a sample error');
      assert.ok(proxy.totalFaults() > 0, 'faults were injected');
      // The workers' own calls went through the proxy too (they receive and delete job messages).
      assert.ok((proxy.calls.get('sqs:ReceiveMessage') ?? 0) > 0 && (proxy.calls.get('sqs:DeleteMessage') ?? 0) > 0);
      await leftovers(fleetId!, harness);
      assert.deepEqual(harness.errors, []);
    } finally {
      await harness.stop();
      harness.cleanup();
      await proxy.stop();
    }
  });

  test('an instance lost under its worker mid-sample: the job runs again elsewhere, nothing lost or twice, nothing left', { timeout: 420_000 }, async () => {
    await world.moto.reset();
    const images = await seedEc2FleetWorld(world.moto.url, { workerAmi: true });
    const harness = new InstanceHarness({ motoUrl: world.moto.url, env: WORKER_ENV, workerAmis: [images.worker] });
    harness.start();
    const logDir = testLogDir('fleet-ec2-terminated');
    const started = Date.now();
    try {
      const child = startCt(run(5, logDir), { cwd: world.dirs.work, env: fleetEnv(world.moto, world.dirs, EC2_FLEET_ENV) });
      const done = finished(child);
      // Once an instance runs a job in its sandbox (its containers up), it is terminated from outside.
      let victim: string | undefined;
      let jobId: string | undefined;
      const runningProjects = () =>
        execFileSync('docker', ['ps', '--filter', 'status=running', '--filter', 'label=com.docker.compose.project', '--format', '{{.Label "com.docker.compose.project"}}'], { encoding: 'utf8' });
      for (let i = 0; i < 900 && !victim && child.exitCode === null; i++) {
        for (const id of harness.instances.keys()) {
          const log = harness.localLog(id);
          const job = /job (\S+) started/.exec(log);
          const run = /sandbox run ([a-z0-9]{8})/.exec(log);
          if (job && run && runningProjects().includes(`ct-${run[1]}-`)) {
            victim = id;
            jobId = job[1];
            break;
          }
        }
        if (!victim) await sleep(200);
      }
      assert.ok(victim, 'an instance runs a job in its sandbox');
      await harness.terminate(victim, { abrupt: true });
      // What it had in hand when it went: started, never finished (its log ends at the kill).
      const victimLog = harness.localLog(victim);
      const finishedThere = new Set([...victimLog.matchAll(/job (\S+) ok in/g)].map((m) => m[1]));
      const inFlight = [...victimLog.matchAll(/job (\S+) started/g)].map((m) => m[1]!).filter((j) => !finishedThere.has(j));
      const r = await done;
      const wall = (Date.now() - started) / 1000;
      const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stdout + r.stderr)?.[1];
      const bootLogs = [...harness.instances.keys()].map((id) => `--- ${id}\n${harness.localLog(id).slice(-3000)}`).join('\n');
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}\n${bootLogs}\n${harness.errors.join('\n')}`);
      const c = await count(logDir, 5);
      console.log(
        `EC2 instance ${victim} terminated while running ${inFlight.length} job(s) (first seen: ${jobId}): ${harness.instances.size} instance(s) in all; ` +
          `${c.lost} lost, ${c.duplicated} duplicated; its sandbox containers removed with the machine: ${harness.containersGone.length}; wall ${wall.toFixed(0)} s`,
      );
      assert.equal(c.lost, 0, 'no result lost');
      assert.equal(c.duplicated, 0, 'no result twice');
      assert.deepEqual(c.errors, []);
      const events = readEvents(readFileSync(join(logDir, 'fleet', fleetId!, 'events.jsonl'), 'utf8'));
      assert.ok(inFlight.length >= 1, `the instance had a job in hand when it went:\n${victimLog.slice(-3000)}`);
      for (const j of inFlight) {
        const done = events.filter((e) => e.event === 'job_done' && e.job_id === j);
        assert.equal(done.length, 1, `job ${j} done once`);
        assert.notEqual(done[0]!.worker, victim, `job ${j} done elsewhere, not by the lost instance:\n${JSON.stringify(done)}\n${victimLog.slice(-3000)}`);
      }
      await leftovers(fleetId!, harness);
      assert.deepEqual(harness.errors, []);
    } finally {
      await harness.stop();
      harness.cleanup();
    }
  });
});

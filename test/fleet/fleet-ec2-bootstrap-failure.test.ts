/**
 * EC2 workers whose bootstrap fails (the code artifact is missing from the bucket): each uploads
 * its log and shuts down, the controller replaces them until `bootstrap_failures` (3) failed in a
 * row, then stops with the tail of the last bootstrap log. moto, the instance harness, the real CLI.
 */
import assert from 'node:assert/strict';
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCt } from '../helpers/cli.js';
import { fleetEnv, motoContents } from '../helpers/fleet.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { EC2_FLEET_ENV, seedEc2FleetWorld, useEc2FleetFixture } from './helpers/ec2-fleet-world.js';
import { InstanceHarness } from './helpers/instance-harness.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const BUCKET = 'lb-fleet-results-migrated';

const world = useEc2FleetFixture('ec2-boot-fail');

test('--ec2 --estimate: credentials, instance type and AMI are read; nothing is created', async () => {
  await seedEc2FleetWorld(world.moto.url, { workerAmi: false });
  const run = ['run', 'eval', '--ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '4', '--estimate'];
  const r = await runCt([...run, '--log-dir', testLogDir('fleet-ec2-estimate')], { cwd: world.dirs.work, env: fleetEnv(world.moto, world.dirs, EC2_FLEET_ENV) });
  assert.equal(r.code, 0, r.stderr);
  assert.match(
    r.stderr,
    /workers: 1 \(c7i\.4xlarge EC2 instances \(spot, on-demand fallback; stock Ubuntu ami-\w+\)\), growing up to 10 as the backlog needs \(fleet\.scale_waves\), 10 sample\(s\) at once each to start, adapting to each machine up to 32 \(fleet\.max_concurrency\)/,
  );
  const ec2 = new EC2Client(world.aws());
  const all = ((await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((x) => x.Instances ?? []);
  const groups = (await ec2.send(new DescribeSecurityGroupsCommand({ Filters: [{ Name: 'group-name', Values: ['linuxbench-fleet-worker-sg'] }] }))).SecurityGroups ?? [];
  ec2.destroy();
  assert.deepEqual(all, []);
  assert.deepEqual(groups, []);
  assert.deepEqual(await motoContents(world.moto), { queues: [], buckets: [], objects: [] });
  await world.moto.reset();
});

test('stock Ubuntu, a missing code artifact: tools installed, log uploaded, instance shut down, no more launches after 3 failed bootstraps', async () => {
  const images = await seedEc2FleetWorld(world.moto.url, { workerAmi: false });
  const s3 = new S3Client({ ...world.aws(), forcePathStyle: true });
  // Before each instance boots, the artifact the controller uploaded goes.
  const harness = new InstanceHarness({
    motoUrl: world.moto.url,
    stockImages: [images.ubuntu],
    beforeBoot: async () => {
      const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'artifacts/' }));
      for (const o of listed.Contents ?? []) await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: o.Key! }));
    },
  });
  harness.start();
  try {
    const run = ['run', 'eval', '--ec2', '--on-demand', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '4', '--max-workers', '2', '--concurrency', '2'];
    const r = await runCt([...run, '--log-dir', testLogDir('fleet-ec2-boot'), '--yes'], { cwd: world.dirs.work, env: fleetEnv(world.moto, world.dirs, EC2_FLEET_ENV), timeoutMs: 120_000 });
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stderr)![1]!;
    assert.match(r.stderr, /launched 2 c7i\.4xlarge on-demand instance\(s\)/);
    assert.match(r.stderr, /failed to bootstrap at step fetch-code \([3-9] in a row\); its log s3:\/\/lb-fleet-results-migrated\/\S+-bootstrap\.log ends:/);
    assert.match(r.stderr, /step fetch-code: FAILED \(exit \d+\)/, 'the tail of the last bootstrap log is shown');
    assert.match(r.stderr, /stopped: its workers keep failing/);
    const launched = [...harness.instances.values()];
    // 2 at first, then replacements until 3 failed in a row: 2 + 2 (the launch budget would allow 6).
    assert.equal(launched.length, 4, launched.map((i) => i.id).join(', '));
    const ec2 = new EC2Client(world.aws());
    const all = ((await ec2.send(new DescribeInstancesCommand({}))).Reservations ?? []).flatMap((x) => x.Instances ?? []);
    ec2.destroy();
    assert.deepEqual(all.map((i) => i.State?.Name), ['terminated', 'terminated', 'terminated', 'terminated']);
    assert.ok(all.every((i) => i.ImageId === images.ubuntu && i.InstanceLifecycle !== 'spot'), 'stock Ubuntu, on-demand');
    for (const inst of launched) {
      assert.ok(inst.shutdowns.includes('-h now'), `${inst.id} shut itself down`);
      const up = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${fleetId}/logs/${inst.id}-bootstrap.log` }));
      const text = await up.Body!.transformToString();
      assert.match(text, /bootstrap failed at step fetch-code/);
      assert.doesNotMatch(text, /step build: start/, 'nothing after the failed step');
      // Stock Ubuntu: Docker, the AWS CLI, a C compiler (the exec agent) and Node 20 (NodeSource) installed at boot.
      assert.match(text, /step install-base: ok in \d+s/);
      assert.match(text, /NodeSource repository for Node 20 configured/);
      assert.deepEqual(inst.installs, [
        'apt-get update -q',
        'apt-get install -y -q awscli docker.io docker-compose-v2 musl-tools',
        'apt-get install -y -q nodejs',
      ]);
    }
    await harness.stop();
    assert.deepEqual(harness.liveGroups(), []);
    assert.deepEqual(harness.errors, []);
  } finally {
    await harness.stop();
    harness.cleanup();
    s3.destroy();
  }
});

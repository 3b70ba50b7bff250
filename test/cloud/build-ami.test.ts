/**
 * `ct cloud build-ami` against moto with the instance harness running the builder's real
 * user-data: a build from stock Ubuntu, an incremental one from that AMI (unchanged images not
 * pulled; the previous AMI deregistered), a failing step (log uploaded, builder terminated, the
 * log's tail shown), Ctrl-C during the build (builder terminated) and bad input (exit 2, nothing created).
 *
 * No registry or npm registry is reachable here: `docker` (for `buildx imagetools inspect`,
 * `pull` and `image inspect`) and `npm` are stand-ins on the instances' PATH that answer from a
 * digest table the test controls and record every call; every other docker call is the real one.
 */
import assert from 'node:assert/strict';
import { DescribeImagesCommand, DescribeInstanceAttributeCommand, DescribeInstancesCommand, DescribeSecurityGroupsCommand, DescribeSnapshotsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { finished, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, fleetEnv } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { EC2_FLEET_ENV, WORKER_AMI_PARAMETER, seedEc2FleetWorld } from '../fleet/helpers/ec2-fleet-world.js';
import { InstanceHarness } from '../fleet/helpers/instance-harness.js';
import { registryStandIn, type RegistryStandIn } from './helpers/registry-stand-in.js';

const BUCKET = 'lb-fleet-results-migrated';
let moto: Moto;
let base: string;
let registry: RegistryStandIn;

const aws = () => ({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });

/** A settings folder with one environment whose compose file declares `images` (and one built service). */
function settingsWith(name: string, images: string[]): string {
  const dir = join(base, name);
  const codebase = join(dir, 'demo', 'app', 'codebase');
  mkdirSync(codebase, { recursive: true });
  const services = images.map((img, i) => `  ${i === 0 ? 'default' : `svc${i}`}:\n    image: ${img}\n`).join('');
  writeFileSync(join(codebase, 'compose.yml'), `services:\n${services}  built:\n    build: .\n    image: ct-test/built-here:1\n`);
  return dir;
}

before(async () => {
  moto = await startMoto();
  base = mkdtempSync(join(tmpdir(), 'ct-build-ami-'));
  registry = registryStandIn(base);
});
after(async () => {
  await moto.stop();
  rmSync(base, { recursive: true, force: true });
});

function harnessFor(stock: string): InstanceHarness {
  return new InstanceHarness({ motoUrl: moto.url, stockImages: [stock], pathPrefix: [registry.shims], pollMs: 200, env: registry.env });
}

function buildEnv(settings: string): NodeJS.ProcessEnv {
  return fleetEnv(moto, { settings, state: join(base, 'state') }, { ...EC2_FLEET_ENV, CT_FLEET_AMI_POLL_SECONDS: '0.3', CT_FLEET_AMI_BUILD_TIMEOUT: '240' });
}

async function builders(ec2: EC2Client) {
  const r = await ec2.send(new DescribeInstancesCommand({ Filters: [{ Name: 'tag:ct:role', Values: ['ami-builder'] }] }));
  return (r.Reservations ?? []).flatMap((x) => x.Instances ?? []);
}

/** The log a build uploaded, found by the build id ct printed. */
async function buildLog(s3: S3Client, stderr: string): Promise<string> {
  const id = /build (\S+): \d+ environment image/.exec(stderr)![1]!;
  return (await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `ami-builds/${id}/build.log` }))).Body!.transformToString();
}

test('a build from stock Ubuntu, then an incremental one from it: images pulled only when their digest changed, one AMI kept, builders terminated', async () => {
  const images = await seedEc2FleetWorld(moto.url, { workerAmi: false });
  const settings = settingsWith('two-images', ['ct-test/app:1', 'ct-test/db:2']);
  registry.setDigests({ 'ct-test/app:1': 'sha256:aaa1', 'ct-test/db:2': 'sha256:bbb1' });
  const harness = harnessFor(images.ubuntu);
  harness.start();
  const ec2 = new EC2Client(aws());
  const s3 = new S3Client({ ...aws(), forcePathStyle: true });
  const ssm = new SSMClient(aws());
  try {
    const first = await runCt(['cloud', 'build-ami'], { cwd: base, env: buildEnv(settings), timeoutMs: 90_000 });
    assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
    const ami1 = first.stdout.trim();
    assert.match(ami1, /^ami-\w+$/);
    assert.match(first.stderr, /2 environment image\(s\); from stock Ubuntu ami-\w+/);
    for (const s of ['install-base', 'install-node', 'npm-cache', 'docker-login', 'pull-images']) assert.match(first.stderr, new RegExp(`step ${s}: ok in \\d+s`), `progress of ${s}`);
    assert.match(first.stderr, /images: 2 pulled, 0 unchanged/);
    assert.match(first.stderr, new RegExp(`image ${ami1} available in \\d+s`));
    assert.equal((await ssm.send(new GetParameterCommand({ Name: WORKER_AMI_PARAMETER }))).Parameter?.Value, ami1);
    const image1 = (await ec2.send(new DescribeImagesCommand({ ImageIds: [ami1] }))).Images![0]!;
    assert.equal(image1.State, 'available');
    const tags1 = Object.fromEntries((image1.Tags ?? []).map((t) => [t.Key, t.Value]));
    assert.equal(tags1['ct:image:ct-test/app:1'], 'sha256:aaa1');
    assert.equal(tags1['ct:image:ct-test/db:2'], 'sha256:bbb1');
    assert.equal(tags1.ManagedBy, 'ct');
    assert.deepEqual(registry.pulls(), ['ct-test/app:1', 'ct-test/db:2']);

    // The builder: stock Ubuntu, tagged, no inbound rule, shutdown behaviour stop, ran its steps, terminated.
    const [b1] = await builders(ec2);
    assert.ok(b1);
    assert.equal(b1.ImageId, images.ubuntu);
    assert.equal(b1.State?.Name, 'terminated');
    const btags = Object.fromEntries((b1.Tags ?? []).map((t) => [t.Key, t.Value]));
    assert.equal(btags.ManagedBy, 'ct');
    assert.equal(btags.LaunchedBy, 'moto');
    assert.match(btags.Name!, /ami-builder-/);
    const emulated = harness.instances.get(b1.InstanceId!)!;
    assert.ok(emulated.shutdowns.includes('-h now'), 'the builder powered itself off');
    assert.ok(Buffer.byteLength(emulated.userData) <= 16 * 1024);
    assert.doesNotMatch(emulated.userData, new RegExp(`${FAKE_AWS.AWS_ACCESS_KEY_ID}|${FAKE_AWS.AWS_SECRET_ACCESS_KEY}`));
    assert.equal(spawnSync('bash', ['-n'], { input: emulated.userData }).status, 0);
    // Stock Ubuntu lacks the AWS CLI, a C compiler (the exec agent) and Node (docker answers from the stand-in on its PATH).
    assert.ok(emulated.installs.includes('apt-get install -y -q awscli musl-tools'), emulated.installs.join('\n'));
    assert.ok(emulated.installs.includes('apt-get install -y -q nodejs'), emulated.installs.join('\n'));
    assert.ok(emulated.installs.some((l) => /^npm ci .*--cache \S+\/opt\/ct-ami\/npm-cache/.test(l)), emulated.installs.join('\n'));
    const groups = (await ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: b1.SecurityGroups!.map((g) => g.GroupId!) }))).SecurityGroups!;
    assert.deepEqual(groups.flatMap((g) => g.IpPermissions ?? []), []);
    const log1 = await buildLog(s3, first.stderr);
    assert.match(log1, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ step pull-images: ok in \d+s$/m);
    assert.match(log1, /powering off: build \S+ complete/);
    const snapshots1 = (image1.BlockDeviceMappings ?? []).map((m) => m.Ebs?.SnapshotId).filter(Boolean) as string[];

    // Incremental: db's digest changed, app's did not.
    registry.setDigests({ 'ct-test/app:1': 'sha256:aaa1', 'ct-test/db:2': 'sha256:bbb2' });
    const second = await runCt(['cloud', 'build-ami'], { cwd: base, env: buildEnv(settings), timeoutMs: 90_000 });
    assert.equal(second.code, 0, `${second.stdout}\n${second.stderr}`);
    const ami2 = second.stdout.trim();
    assert.notEqual(ami2, ami1);
    assert.match(second.stderr, new RegExp(`from the previous AMI ${ami1}`));
    assert.match(second.stderr, /images: 1 pulled, 1 unchanged/);
    assert.deepEqual(registry.pulls(), ['ct-test/app:1', 'ct-test/db:2', 'ct-test/db:2'], 'only the changed image was pulled again');
    const log2 = await buildLog(s3, second.stderr);
    assert.match(log2, /image ct-test\/app:1: unchanged \(sha256:aaa1\), skipped/);
    assert.match(log2, /image ct-test\/db:2: pulling \(registry sha256:bbb2, previous AMI sha256:bbb1\)/);
    assert.equal((await ssm.send(new GetParameterCommand({ Name: WORKER_AMI_PARAMETER }))).Parameter?.Value, ami2);
    const tags2 = Object.fromEntries(((await ec2.send(new DescribeImagesCommand({ ImageIds: [ami2] }))).Images![0]!.Tags ?? []).map((t) => [t.Key, t.Value]));
    assert.equal(tags2['ct:image:ct-test/db:2'], 'sha256:bbb2');
    // The previous AMI and its snapshots are gone.
    const left = await ec2.send(new DescribeImagesCommand({ ImageIds: [ami1] })).then((r) => r.Images ?? [], () => []);
    assert.deepEqual(left, []);
    assert.match(second.stderr, new RegExp(`deregistered the previous AMI ${ami1}`));
    assert.equal(snapshots1.length, 1, 'CreateImage made one snapshot of the builder');
    assert.match(second.stderr, new RegExp(`deleted snapshot\\(s\\) ${snapshots1[0]}`));
    const snaps = await ec2.send(new DescribeSnapshotsCommand({ SnapshotIds: snapshots1 })).then((r) => r.Snapshots ?? [], () => []);
    assert.deepEqual(snaps, []);
    const all = await builders(ec2);
    assert.equal(all.length, 2);
    assert.deepEqual(all.map((i) => i.State?.Name), ['terminated', 'terminated']);
    assert.equal(all.find((i) => i.InstanceId !== b1.InstanceId)!.ImageId, ami1, 'the incremental builder starts from the previous AMI');
    await harness.stop();
    assert.deepEqual(harness.liveGroups(), []);
    assert.deepEqual(harness.errors, []);
  } finally {
    await harness.stop();
    harness.cleanup();
    ec2.destroy();
    s3.destroy();
    ssm.destroy();
    await moto.reset();
  }
});

test('a failing step: the log is uploaded, its tail shown, the builder terminated, no AMI stored, exit 1', async () => {
  const images = await seedEc2FleetWorld(moto.url, { workerAmi: false });
  const settings = settingsWith('missing-image', ['ct-test/app:1', 'ct-test/gone:9']);
  registry.clearPulls();
  registry.setDigests({ 'ct-test/app:1': 'sha256:aaa1' });
  const harness = harnessFor(images.ubuntu);
  harness.start();
  const ec2 = new EC2Client(aws());
  const s3 = new S3Client({ ...aws(), forcePathStyle: true });
  const ssm = new SSMClient(aws());
  try {
    const r = await runCt(['cloud', 'build-ami', '--fresh'], { cwd: base, env: buildEnv(settings), timeoutMs: 90_000 });
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /the AMI build failed \(failed\); the builder's log s3:\/\/lb-fleet-results-migrated\/ami-builds\/\S+\/build\.log ends:/);
    assert.match(r.stderr, /manifest for ct-test\/gone:9 not found/);
    assert.match(r.stderr, /step pull-images: FAILED \(exit 1\)/);
    assert.match(r.stderr, /builder i-\w+ terminated/);
    const log = await buildLog(s3, r.stderr);
    assert.match(log, /build failed at step pull-images/);
    const all = await builders(ec2);
    assert.deepEqual(all.map((i) => i.State?.Name), ['terminated']);
    assert.deepEqual((await ec2.send(new DescribeImagesCommand({ Owners: ['self'] }))).Images ?? [], []);
    await assert.rejects(ssm.send(new GetParameterCommand({ Name: WORKER_AMI_PARAMETER })), /ParameterNotFound/);
    const attr = await ec2.send(new DescribeInstanceAttributeCommand({ InstanceId: all[0]!.InstanceId!, Attribute: 'instanceInitiatedShutdownBehavior' }));
    assert.equal(attr.InstanceInitiatedShutdownBehavior?.Value, 'stop');
    await harness.stop();
    assert.deepEqual(harness.liveGroups(), []);
    assert.deepEqual(harness.errors, []);
  } finally {
    await harness.stop();
    harness.cleanup();
    ec2.destroy();
    s3.destroy();
    ssm.destroy();
    await moto.reset();
  }
});

test('Ctrl-C while the builder works: the builder is terminated, no image is made', async () => {
  const images = await seedEc2FleetWorld(moto.url, { workerAmi: false });
  const settings = settingsWith('slow-image', ['ct-test/slow:1']);
  registry.clearPulls();
  registry.setDigests({ 'ct-test/slow:1': 'sha256:ccc1' });
  const harness = harnessFor(images.ubuntu);
  harness.start();
  const ec2 = new EC2Client(aws());
  try {
    const child = startCt(['cloud', 'build-ami'], { cwd: base, env: buildEnv(settings) });
    const done = finished(child);
    await waitForOutput(child, (t) => /step docker-login: ok/.test(t), 60_000);
    child.kill('SIGINT');
    const r = await done;
    assert.equal(r.code, 130, r.stderr);
    const all = await builders(ec2);
    assert.deepEqual(all.map((i) => i.State?.Name), ['terminated']);
    assert.deepEqual((await ec2.send(new DescribeImagesCommand({ Owners: ['self'] }))).Images ?? [], []);
    for (let i = 0; i < 50 && harness.liveGroups().length; i++) await new Promise((res) => setTimeout(res, 200));
    assert.deepEqual(harness.liveGroups(), [], 'the builder script was ended with its instance');
    assert.deepEqual(registry.pulls(), [], 'the pull never finished');
  } finally {
    await harness.stop();
    harness.cleanup();
    ec2.destroy();
    await moto.reset();
  }
});

test('bad input: exit 2 and nothing created', async () => {
  await seedEc2FleetWorld(moto.url, { workerAmi: false });
  const settings = settingsWith('bad-input', ['ct-test/app:1']);
  const ec2 = new EC2Client(aws());
  try {
    const badRegion = await runCt(['cloud', 'build-ami', '--region', 'nowhere'], { cwd: base, env: buildEnv(settings) });
    assert.equal(badRegion.code, 2, badRegion.stderr);
    assert.match(badRegion.stderr, /region/);
    const badFlag = await runCt(['cloud', 'build-ami', '--frsh'], { cwd: base, env: buildEnv(settings) });
    assert.equal(badFlag.code, 2, badFlag.stderr);
    const badType = await runCt(['cloud', 'build-ami'], { cwd: base, env: { ...buildEnv(settings), CT_EC2_INSTANCE_TYPE: 'c7i.nosuchsize' } });
    assert.equal(badType.code, 2, badType.stderr);
    assert.match(badType.stderr, /c7i\.nosuchsize/);
    const noSettings = await runCt(['cloud', 'build-ami'], { cwd: base, env: buildEnv(join(base, 'no-such-settings')) });
    assert.equal(noSettings.code, 2, noSettings.stderr);
    assert.match(noSettings.stderr, /settings folder .* does not exist/);
    assert.deepEqual(await builders(ec2), []);
    const s3 = new S3Client({ ...aws(), forcePathStyle: true });
    await assert.rejects(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'none' })), /NoSuchBucket/, 'not even the bucket was created');
    s3.destroy();
  } finally {
    ec2.destroy();
    await moto.reset();
  }
});

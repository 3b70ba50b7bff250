import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { REPO_ROOT } from '../helpers/paths.js';
import { runCt } from '../helpers/cli.js';
import { CALLER_IP, startEc2World, tag, type Ec2World } from './helpers/ec2-world.js';

const TRAJECTORY = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const SAMPLE = ['-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJECTORY];

/** The spec's setup timing block, in order, with real numbers. */
const TIMING_BLOCK = new RegExp(
  [
    '^Launching EC2 instance \\((?<type>[\\w.]+) in (?<region>[\\w-]+)\\)\\.\\.\\.',
    '   Instance ID: (?<id>i-[0-9a-f]+)',
    '   Public IP: \\d+\\.\\d+\\.\\d+\\.\\d+',
    '   Instance created in \\d+\\.\\ds',
    'Waiting for instance to be ready and SSH available\\.\\.\\.',
    '   Instance ready in \\d+\\.\\ds',
    'Establishing SSH connection\\.\\.\\.',
    '   SSH connected in \\d+\\.\\ds',
    'Installing dependencies \\(Docker, docker-compose\\)\\.\\.\\.',
    '   Dependencies installed in \\d+\\.\\ds',
    'Transferring compose directory\\.\\.\\.',
    '   Compose transferred in \\d+\\.\\ds',
    'Initializing Docker sandbox \\(via SSH to EC2\\)\\.\\.\\.',
    '   Docker sandbox initialized in \\d+\\.\\ds',
    '',
    'EC2 Docker sandbox ready! \\(Total setup: \\d+\\.\\ds\\)$',
  ].join('\n'),
  'm',
);

describe('ct run eval --sandbox ec2 (moto + Instance Connect fake + loopback sshd)', () => {
  let world: Ec2World;

  before(async () => {
    world = await startEc2World();
  });
  afterEach(async () => {
    await world.reset();
  });
  after(async () => {
    await world?.stop();
  });

  test('launches a tagged instance, runs the sample on it over SSH, prints the timing block and terminates it', async () => {
    const r = await runCt(['run', 'eval', '--sandbox', 'ec2', ...SAMPLE, '--json'], { env: world.env() });
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    assert.equal(out.status, 'success');
    assert.equal(out.samples[0].scores.main_task_success, 'C');

    const m = TIMING_BLOCK.exec(r.stderr);
    assert.ok(m, `timing block not found in:\n${r.stderr}`);
    assert.equal(m.groups!.type, 'c7i.4xlarge');
    assert.equal(m.groups!.region, 'us-east-1');
    const id = m.groups!.id!;
    assert.match(r.stderr, new RegExp(`EC2 instance ${id} terminated\\.`));

    const [inst, ...others] = await world.instances();
    assert.equal(others.length, 0, 'exactly one instance for the run');
    assert.equal(inst!.InstanceId, id);
    assert.equal(inst!.State?.Name, 'terminated');
    assert.equal(inst!.InstanceType, 'c7i.4xlarge');
    assert.equal(inst!.ImageId, world.amiId, 'AMI from the SSM parameter');
    assert.match(tag(inst!, 'Name')!, /^linuxbench-eval-[a-z0-9]{8}$/);
    assert.equal(tag(inst!, 'LaunchedBy'), 'moto', "the caller's IAM user name (moto's default identity)");
    assert.equal(tag(inst!, 'ManagedBy'), 'ct');
    assert.equal(tag(inst!, 'ct:run-id'), tag(inst!, 'Name')!.slice('linuxbench-eval-'.length));

    const sg = await world.securityGroup();
    assert.ok(sg, 'security group linuxbench-eval-sg created');
    assert.deepEqual(inst!.SecurityGroups?.map((g) => g.GroupId), [sg.GroupId]);
    const ingress = (sg.IpPermissions ?? []).map((p) => [p.IpProtocol, p.FromPort, p.ToPort, (p.IpRanges ?? []).map((x) => x.CidrIp)]);
    assert.deepEqual(ingress, [['tcp', 22, 22, [`${CALLER_IP}/32`]]]);

    // The throwaway key was pushed through Instance Connect for this instance and the SSH user.
    assert.ok(world.eic.pushes.length >= 1);
    assert.ok(world.eic.pushes.every((p) => p.instanceId === id && p.user === world.sshd!.user));
    // Its host key record went away with the instance.
    const kh = join(world.dir, 'state', 'known_hosts');
    assert.ok(!existsSync(kh) || !readFileSync(kh, 'utf8').includes(id));
    const left = execFileSync('docker', ['ps', '-aq', '--filter', `label=ct.run-id=${tag(inst!, 'ct:run-id')}`]).toString().trim();
    assert.equal(left, '', 'no containers left');
  });

  test('--keep-ec2-instance leaves it running and prints how to connect and terminate; cleanup --all removes it', async () => {
    const r = await runCt(
      ['run', 'eval', '--sandbox', 'ec2', ...SAMPLE, '--keep-ec2-instance', '--ec2-instance-type', 't3.large', '--region', 'us-west-2',
        '--ssh-cidr', '198.51.100.0/24'],
      { env: world.env() },
    );
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /^Launching EC2 instance \(t3\.large in us-west-2\)\.\.\.$/m);
    const [inst] = await world.instances('us-west-2');
    const id = inst!.InstanceId!;
    assert.equal(inst!.State?.Name, 'running');
    assert.equal(tag(inst!, 'ct:kept'), 'true');
    assert.ok(r.stderr.includes(`aws ec2-instance-connect ssh --instance-id ${id} --os-user ${world.sshd!.user} --region us-west-2`), r.stderr);
    assert.ok(r.stderr.includes(`aws ec2 terminate-instances --instance-ids ${id} --region us-west-2`), r.stderr);
    assert.equal(world.myIp.hits, 0, '--ssh-cidr skips the what-is-my-IP lookup');
    const sg = await world.securityGroup('linuxbench-eval-sg', 'us-west-2');
    assert.deepEqual(sg!.IpPermissions?.[0]?.IpRanges?.map((x) => x.CidrIp), ['198.51.100.0/24']);

    // A kept instance survives an ordinary cleanup, and goes with --all.
    const plain = await runCt(['sandbox', 'cleanup', '--sandbox', 'ec2', '--region', 'us-west-2', '--json'], { env: world.env() });
    assert.equal(plain.code, 0, plain.stderr);
    assert.deepEqual(JSON.parse(plain.stdout).removed, []);
    assert.equal((await world.instances('us-west-2'))[0]!.State?.Name, 'running');
    const all = await runCt(['sandbox', 'cleanup', '--sandbox', 'ec2', '--region', 'us-west-2', '--all', '--json'], { env: world.env() });
    assert.equal(all.code, 0, all.stderr);
    assert.equal(JSON.parse(all.stdout).removed.length, 1);
    assert.equal((await world.instances('us-west-2'))[0]!.State?.Name, 'terminated');
  });

  test('an existing security group is reused and gains the caller rule once', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await runCt(['run', 'eval', '--sandbox', 'ec2', ...SAMPLE], { env: world.env() });
      assert.equal(r.code, 0, r.stderr);
    }
    const sg = await world.securityGroup();
    assert.deepEqual(sg!.IpPermissions?.flatMap((p) => p.IpRanges?.map((x) => x.CidrIp)), [`${CALLER_IP}/32`]);
    assert.equal((await world.instances()).filter((i) => i.State?.Name !== 'terminated').length, 0);
  });
});

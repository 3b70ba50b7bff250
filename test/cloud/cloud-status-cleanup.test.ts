/**
 * `ct cloud status` and `ct cloud cleanup` against a moto account seeded with two users' live and
 * orphaned resources (test/cloud/seed.ts), run as the real CLI with each user's own credentials
 * (IAM users alice and bob; carol as an SSO-style role session).
 */
import assert from 'node:assert/strict';
import { DescribeInstancesCommand, DescribeSecurityGroupsCommand, EC2Client } from '@aws-sdk/client-ec2';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ctEnv, runCt } from '../helpers/cli.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { clientConfig, iamUser, roleSession, seed, type Keys, type Seeded } from './seed.js';

let moto: Moto;
let cwd: string;
let alice: Keys;
let bob: Keys;
let carol: Keys;
let seeded: Seeded;

function env(keys: Keys, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e = ctEnv({ AWS_ENDPOINT_URL: moto.url, AWS_REGION: 'us-east-1', ...keys });
  delete e.AWS_PROFILE;
  if (!keys.AWS_SESSION_TOKEN) delete e.AWS_SESSION_TOKEN;
  return { ...e, ...extra };
}
const ct = (keys: Keys, args: string[], extra: Record<string, string> = {}) => runCt(['cloud', ...args], { cwd, env: env(keys, extra), timeoutMs: 60_000 });

async function states(): Promise<Record<string, string>> {
  const ec2 = new EC2Client(clientConfig(moto));
  try {
    const r = await ec2.send(new DescribeInstancesCommand({}));
    const byId = new Map((r.Reservations ?? []).flatMap((x) => x.Instances ?? []).map((i) => [i.InstanceId!, i.State!.Name!]));
    return Object.fromEntries(Object.entries(seeded.instances).map(([label, id]) => [label, byId.get(id)!]));
  } finally {
    ec2.destroy();
  }
}
async function queues(): Promise<string[]> {
  const sqs = new SQSClient(clientConfig(moto));
  try {
    return ((await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? []).map((u) => u.split('/').pop()!).sort();
  } finally {
    sqs.destroy();
  }
}
async function parameters(): Promise<string[]> {
  const ssm = new SSMClient(clientConfig(moto));
  try {
    return ((await ssm.send(new GetParametersByPathCommand({ Path: '/linuxbench/', Recursive: true }))).Parameters ?? []).map((p) => p.Name!).sort();
  } finally {
    ssm.destroy();
  }
}
async function groupNames(): Promise<string[]> {
  const ec2 = new EC2Client(clientConfig(moto));
  try {
    return ((await ec2.send(new DescribeSecurityGroupsCommand({}))).SecurityGroups ?? []).map((g) => g.GroupName!).filter((n) => n !== 'default').sort();
  } finally {
    ec2.destroy();
  }
}

before(async () => {
  moto = await startMoto();
  cwd = mkdtempSync(join(tmpdir(), 'ct-cloud-'));
});
after(async () => {
  await moto.stop();
  rmSync(cwd, { recursive: true, force: true });
});

async function fresh(): Promise<void> {
  await moto.reset();
  alice = await iamUser(moto, 'alice');
  bob = await iamUser(moto, 'bob');
  carol = await roleSession(moto, 'carol');
  seeded = await seed(moto);
}

describe('ct cloud status', () => {
  before(fresh);

  test("shows only the caller's fleets, workers, queue counts, results, cost, sandboxes and AMI builders", async () => {
    const r = await ct(alice, ['status']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\(alice\)/);
    assert.match(r.stdout, /fleet alive1 \(alice\): 2 worker\(s\); queue 3 visible \/ 0 in flight \/ 0 DLQ; results 1\/5; cost so far \$\d+\.\d\d/);
    assert.match(r.stdout, /fleet done1 \(alice\) \[finished\]: 1 worker\(s\)/);
    assert.match(r.stdout, /fleet ghost1 \(alice\): 1 worker\(s\); queue 0 visible/);
    assert.match(r.stdout, /fleet tagged1 \(alice\) \[finished\]: 0 worker\(s\)/, 'queues tagged LaunchedBy=alice are hers');
    assert.match(r.stdout, new RegExp(`${seeded.instances['alive1-a']}  c7i\\.4xlarge  spot  running  \\d+s`));
    assert.match(r.stdout, new RegExp(`sandboxes:\\n  ${seeded.instances['alice-sandbox']}  m6i\\.xlarge  on-demand  running`));
    assert.match(r.stdout, new RegExp(`AMI builders:\\n  ${seeded.instances['alice-builder']}  c6i\\.2xlarge`));
    for (const other of ['bobdone', 'bobghost', 'nobody1', 'carol', seeded.instances['unmanaged']!, seeded.instances['untagged']!]) {
      assert.doesNotMatch(r.stdout, new RegExp(other), `${other} is not alice's`);
    }
    assert.match(r.stdout, /1 fleet\(s\) with no known owner not shown \(--all-users shows them\)/);
  });

  test('--json --all-users: every user\'s resources, and the fleet nobody owns, never unmanaged ones', async () => {
    const r = await ct(bob, ['status', '--all-users', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout) as {
      caller: string;
      fleets: Array<{ fleetId: string; owners: string[]; counts: { visible: number }; jobs?: number; results: number; finished: boolean; workers: Array<{ id: string }> }>;
      sandboxes: Array<{ launchedBy: string }>;
    };
    assert.equal(s.caller, 'bob');
    assert.deepEqual(s.fleets.map((f) => f.fleetId).sort(), ['alive1', 'bobdone', 'bobghost', 'done1', 'ghost1', 'nobody1', 'tagged1']);
    const alive = s.fleets.find((f) => f.fleetId === 'alive1')!;
    assert.deepEqual([alive.counts.visible, alive.jobs, alive.results, alive.finished, alive.workers.length], [3, 5, 1, false, 2]);
    assert.deepEqual(s.fleets.find((f) => f.fleetId === 'nobody1')!.owners, []);
    assert.deepEqual(s.sandboxes.map((x) => x.launchedBy).sort(), ['alice', 'carol']);
    assert.doesNotMatch(r.stdout, new RegExp(`${seeded.instances['unmanaged']}|${seeded.instances['untagged']}|ghost9`));
  });

  test('an SSO session is known by its session name', async () => {
    const r = await ct(carol, ['status']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /\(carol\)\nfleets: none\nsandboxes:\n  i-\w+  t3\.large/);
  });

  test('credentials are checked first: AWS_PROFILE with static keys is refused with exit 2', async () => {
    const r = await ct(alice, ['status'], { AWS_PROFILE: 'linuxbench-fleet' });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /both AWS_PROFILE \(linuxbench-fleet\) and AWS_ACCESS_KEY_ID are set/);
    assert.equal(r.stdout, '');
  });
});

describe('ct cloud cleanup', () => {
  before(fresh);

  test("lists alice's leftovers and removes nothing without --yes", async () => {
    const before = await states();
    const r = await ct(alice, ['cleanup', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const { leftovers } = JSON.parse(r.stdout) as { leftovers: Array<{ kind: string; id: string; label: string }> };
    const ids = leftovers.map((l) => `${l.kind} ${l.kind === 'queue' || l.kind === 'security-group' ? l.label : l.id}`).sort();
    assert.deepEqual(ids, [
      `instance ${seeded.instances['done1']}`,
      `instance ${seeded.instances['ghost1']}`,
      'parameter /linuxbench/fleet/done1/ANTHROPIC_API_KEY',
      'queue lb-fleet-done1-dlq',
      'queue lb-fleet-done1-done',
      'queue lb-fleet-done1-work',
      'queue lb-fleet-tagged1-dlq',
      'queue lb-fleet-tagged1-done',
      'queue lb-fleet-tagged1-work',
      `security-group ${seeded.groups['unused']} linuxbench-old-sg`,
    ].sort());
    assert.deepEqual(await states(), before);
    const text = await ct(alice, ['cleanup']);
    assert.match(text.stdout, /10 leftover\(s\) in us-east-1 \(alice\); run again with --yes to remove them/);
  });

  test('--yes removes exactly those; a second run finds nothing; bob\'s and unmanaged resources are untouched', async () => {
    const r = await ct(alice, ['cleanup', '--yes']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /removed 10 of 10 leftover\(s\)/);
    const s = await states();
    assert.equal(s['done1'], 'terminated');
    assert.equal(s['ghost1'], 'terminated');
    for (const live of ['alive1-a', 'alive1-b', 'alice-sandbox', 'alice-builder', 'bobdone', 'bobghost', 'carol-sandbox', 'unmanaged', 'untagged']) {
      assert.equal(s[live], 'running', live);
    }
    const q = await queues();
    assert.deepEqual(q.filter((n) => /done1|tagged1/.test(n)), []);
    for (const kept of ['lb-fleet-alive1-work', 'lb-fleet-bobdone-work', 'lb-fleet-nobody1-work', 'other-work']) assert.ok(q.includes(kept), kept);
    assert.deepEqual(await parameters(), ['/linuxbench/fleet/alive1/ANTHROPIC_API_KEY', '/linuxbench/fleet/bobdone/ANTHROPIC_API_KEY']);
    assert.deepEqual(await groupNames(), ['linuxbench-eval-sg', 'linuxbench-fleet-worker-sg', 'someone-elses-sg']);

    const again = await ct(alice, ['cleanup', '--yes']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, 'nothing left behind in us-east-1 (alice)\n');
  });

  test('past fleet.instance_max_hours, a live fleet\'s workers and a sandbox are leftovers too (listed only)', async () => {
    const r = await ct(alice, ['cleanup', '--json'], { CT_FLEET_INSTANCE_MAX_HOURS: '0.000001' });
    assert.equal(r.code, 0, r.stderr);
    const { leftovers } = JSON.parse(r.stdout) as { leftovers: Array<{ id: string; reason: string }> };
    assert.deepEqual(
      leftovers.map((l) => l.id).sort(),
      [seeded.instances['alive1-a'], seeded.instances['alive1-b'], seeded.instances['alice-sandbox'], seeded.instances['alice-builder']].sort(),
    );
    assert.ok(leftovers.every((l) => /past the 0\.000001 h limit/.test(l.reason)));
  });

  test('--all-users --yes takes every user\'s leftovers and the unowned fleet, keeps live fleets; then nothing is left', async () => {
    const r = await ct(bob, ['cleanup', '--all-users', '--yes']);
    assert.equal(r.code, 0, r.stderr);
    const s = await states();
    assert.equal(s['bobdone'], 'terminated');
    assert.equal(s['bobghost'], 'terminated');
    for (const live of ['alive1-a', 'alive1-b', 'alice-sandbox', 'carol-sandbox', 'unmanaged', 'untagged']) assert.equal(s[live], 'running', live);
    assert.deepEqual(await queues(), ['lb-fleet-alive1-dlq', 'lb-fleet-alive1-done', 'lb-fleet-alive1-work', 'other-work']);
    assert.deepEqual(await parameters(), ['/linuxbench/fleet/alive1/ANTHROPIC_API_KEY']);
    const again = await ct(bob, ['cleanup', '--all-users']);
    assert.equal(again.stdout, 'nothing left behind in us-east-1 (all users)\n');
  });
});

/**
 * Abandoned fleets (unfinished, no live worker, no progress for fleet.stale_teardown_minutes):
 * `ct cloud status` marks them with their age and backlog, `ct cloud cleanup` offers their queues
 * and secrets (results too with --delete-results), and `ct fleet discard` removes one by id. Run
 * as the real CLI against moto, with the stale limit shortened to STALE_MINUTES through
 * CT_FLEET_STALE_TEARDOWN_MINUTES; a fresh fleet is kept fresh by touching its worker log before
 * each command, as its workers would.
 */
import assert from 'node:assert/strict';
import { DescribeImagesCommand, EC2Client, RunInstancesCommand, TerminateInstancesCommand } from '@aws-sdk/client-ec2';
import { CreateBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParametersByPathCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { gatherInventory } from '../../src/cloud/inventory.js';
import { ctEnv, runCt } from '../helpers/cli.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { BUCKET, clientConfig, iamUser, seedFleet, type Keys } from './seed.js';

/** 9 s: long enough for one ct command to read a fleet touched just before it, short enough to wait out once. */
const STALE_MINUTES = 0.15;

let moto: Moto;
let cwd: string;
let alice: Keys;
let bob: Keys;
const workers: Record<string, string> = {};

function env(keys: Keys): NodeJS.ProcessEnv {
  const e = ctEnv({ AWS_ENDPOINT_URL: moto.url, AWS_REGION: 'us-east-1', CT_FLEET_STALE_TEARDOWN_MINUTES: String(STALE_MINUTES), ...keys });
  delete e.AWS_PROFILE;
  delete e.AWS_SESSION_TOKEN;
  return e;
}

/** Runs ct as `keys`, after the fresh fleet's workers made progress. */
async function ct(keys: Keys, args: string[]) {
  await touchFresh();
  return runCt(args, { cwd, env: env(keys), timeoutMs: 60_000 });
}

async function touchFresh(): Promise<void> {
  const s3 = new S3Client({ ...clientConfig(moto), forcePathStyle: true });
  try {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'fresh1/logs/w1-worker.log', Body: `log ${Date.now()}` }));
  } finally {
    s3.destroy();
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
async function objects(fleetId: string): Promise<string[]> {
  const s3 = new S3Client({ ...clientConfig(moto), forcePathStyle: true });
  try {
    return ((await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${fleetId}/` }))).Contents ?? []).map((o) => o.Key!).sort();
  } finally {
    s3.destroy();
  }
}

/** A fleet worker instance tagged as the EC2 launcher tags it; terminated at once with `terminated`. */
async function worker(fleetId: string, by: string, o: { terminated?: boolean } = {}): Promise<string> {
  const ec2 = new EC2Client(clientConfig(moto));
  try {
    const image = (await ec2.send(new DescribeImagesCommand({}))).Images![0]!.ImageId!;
    const tags = { FleetId: fleetId, LaunchedBy: by, ManagedBy: 'ct', Name: `linuxbench-worker-${fleetId}` };
    const r = await ec2.send(
      new RunInstancesCommand({
        ImageId: image,
        InstanceType: 'c7i.4xlarge',
        MinCount: 1,
        MaxCount: 1,
        TagSpecifications: [{ ResourceType: 'instance', Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })) }],
      }),
    );
    const id = r.Instances![0]!.InstanceId!;
    if (o.terminated) await ec2.send(new TerminateInstancesCommand({ InstanceIds: [id] }));
    return id;
  } finally {
    ec2.destroy();
  }
}

/**
 * alice: `stale1` (4 jobs, 1 result, 3 queued, a secret; its one worker terminated) and `busy1`
 * (3 jobs, none done, a running worker) with no progress past the limit, and `fresh1` (2 jobs,
 * none done, no worker) making progress. bob: `stale2` (2 jobs, 1 result, a secret). Nobody:
 * `stale3` (3 jobs, none done, untagged queues, a secret).
 */
before(async () => {
  moto = await startMoto();
  cwd = mkdtempSync(join(tmpdir(), 'ct-abandoned-'));
  alice = await iamUser(moto, 'alice');
  bob = await iamUser(moto, 'bob');
  const s3 = new S3Client({ ...clientConfig(moto), forcePathStyle: true });
  try {
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
  } finally {
    s3.destroy();
  }
  workers['stale1'] = await worker('stale1', 'alice', { terminated: true });
  workers['busy1'] = await worker('busy1', 'alice');
  await seedFleet(moto, 'stale1', { jobs: 4, results: 1, queued: 3, secret: true });
  await seedFleet(moto, 'busy1', { jobs: 3, queued: 3, queueTags: { LaunchedBy: 'alice', ManagedBy: 'ct' } });
  await seedFleet(moto, 'stale2', { jobs: 2, results: 1, queued: 1, secret: true, queueTags: { LaunchedBy: 'bob', ManagedBy: 'ct' } });
  await seedFleet(moto, 'stale3', { jobs: 3, queued: 3, secret: true });
  await seedFleet(moto, 'fresh1', { jobs: 2, queued: 2, secret: true, queueTags: { LaunchedBy: 'alice', ManagedBy: 'ct' } });
  // S3 times are whole seconds: wait a second past the limit.
  await new Promise((r) => setTimeout(r, STALE_MINUTES * 60_000 + 1500));
});
after(async () => {
  await moto?.stop();
  rmSync(cwd, { recursive: true, force: true });
});

describe('the abandoned rule', () => {
  test('a fleet is abandoned once its last progress is older than the stale limit, never with a live worker', async () => {
    const cfg = clientConfig(moto);
    const c = { ec2: new EC2Client(cfg), sqs: new SQSClient(cfg), s3: new S3Client({ ...cfg, forcePathStyle: true }), ssm: new SSMClient(cfg) };
    try {
      const read = async (now: number) => {
        const inv = await gatherInventory({ ...c, region: 'us-east-1', bucket: BUCKET, queuePrefix: 'lb-fleet-', secretsPrefix: '/linuxbench/fleet/', staleTeardownMinutes: 5, prices: { prices: {} }, now });
        return Object.fromEntries(inv.fleets.map((f) => [f.fleetId, f]));
      };
      const today = await read(Date.now());
      assert.equal(today['stale1']!.abandoned, false, 'within 5 minutes of its last progress');
      assert.ok(today['stale1']!.idleSeconds! < 300);
      assert.deepEqual([today['stale1']!.jobs, today['stale1']!.results, today['stale1']!.unfinished, today['stale1']!.objects], [4, 1, 3, 3]);
      const later = await read(Date.now() + 6 * 60_000);
      assert.deepEqual(
        Object.values(later).filter((f) => f.abandoned).map((f) => f.fleetId),
        ['fresh1', 'stale1', 'stale2', 'stale3'],
        'busy1 has a running worker',
      );
      assert.ok(later['stale1']!.idleSeconds! >= 360);
      assert.equal(later['stale1']!.lastProgress, today['stale1']!.lastProgress);
    } finally {
      for (const client of Object.values(c)) client.destroy();
    }
  });
});

describe('ct cloud status', () => {
  test('shows an abandoned fleet with its age and backlog; a fresh or busy unfinished fleet is not abandoned', async () => {
    const r = await ct(alice, ['cloud', 'status']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /fleet stale1 \(alice\) \[abandoned: no progress for \d+s, 3 job\(s\) without a result\]: 0 worker\(s\); queue 3 visible \/ 0 in flight \/ 0 DLQ; results 1\/4/,
    );
    assert.match(r.stdout, /discard its queues and secrets \(results kept\): ct fleet discard stale1, or ct cloud cleanup --yes/);
    assert.match(r.stdout, /fleet busy1 \(alice\): 1 worker\(s\); queue 3 visible/);
    assert.match(r.stdout, /fleet fresh1 \(alice\): 0 worker\(s\); queue 2 visible \/ 0 in flight \/ 0 DLQ; results 0\/2/);
    assert.doesNotMatch(r.stdout, /stale2|stale3/);

    const j = await ct(alice, ['cloud', 'status', '--all-users', '--json']);
    assert.equal(j.code, 0, j.stderr);
    const fleets = Object.fromEntries(
      (JSON.parse(j.stdout) as { fleets: Array<{ fleetId: string; abandoned: boolean; idleSeconds: number; unfinished: number; counts: { visible: number } }> }).fleets.map((f) => [f.fleetId, f]),
    );
    assert.deepEqual(
      Object.values(fleets).filter((f) => f.abandoned).map((f) => f.fleetId).sort(),
      ['stale1', 'stale2', 'stale3'],
    );
    assert.ok(fleets['stale3']!.idleSeconds >= STALE_MINUTES * 60, JSON.stringify(fleets['stale3']));
    assert.deepEqual([fleets['stale3']!.unfinished, fleets['stale3']!.counts.visible], [3, 3]);
  });
});

describe('ct fleet discard', () => {
  test('an unknown fleet id is refused with exit 2', async () => {
    const r = await ct(alice, ['fleet', 'discard', 'nosuch1', '--yes']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /no fleet nosuch1 in us-east-1: no queue lb-fleet-nosuch1-work/);
  });

  test('a fleet with a live worker is refused with exit 2, nothing removed', async () => {
    const r = await ct(alice, ['fleet', 'discard', 'busy1', '--yes']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, new RegExp(`fleet busy1 has 1 live worker instance\\(s\\) \\(${workers['busy1']}\\)`));
    assert.match(r.stderr, /terminate-instances/);
    assert.ok((await queues()).includes('lb-fleet-busy1-work'));
  });

  test('without a terminal and without --yes: exit 2 saying to pass --yes, nothing removed', async () => {
    const r = await ct(alice, ['fleet', 'discard', 'stale3']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /pass --yes to discard fleet stale3/);
    assert.match(r.stdout, /fleet stale3: abandoned, no progress for \d+s; 3 of 3 job\(s\) without a result/);
    assert.ok((await queues()).includes('lb-fleet-stale3-work'));
  });

  test("--yes --json removes any user's fleet's queues and secrets and keeps its results", async () => {
    const r = await ct(alice, ['fleet', 'discard', 'stale3', '--yes', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { state: string; discarded: boolean; results: string; removed: Array<{ kind: string; label: string }> };
    assert.deepEqual([out.state, out.discarded, out.results], ['abandoned', true, 'kept']);
    assert.deepEqual(out.removed.map((l) => `${l.kind} ${l.label}`).sort(), [
      'parameter /linuxbench/fleet/stale3/ANTHROPIC_API_KEY',
      'queue lb-fleet-stale3-dlq',
      'queue lb-fleet-stale3-done',
      'queue lb-fleet-stale3-work',
    ]);
    assert.deepEqual((await queues()).filter((q) => q.includes('stale3')), []);
    assert.ok(!(await parameters()).some((p) => p.includes('stale3')));
    assert.deepEqual(await objects('stale3'), ['stale3/logs/w1-worker.log', 'stale3/manifest.json']);
  });
});

describe('ct cloud cleanup', () => {
  test("lists the caller's abandoned fleet with its reason, not the fresh or the busy one", async () => {
    const r = await ct(alice, ['cloud', 'cleanup']);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split('\n');
    assert.deepEqual(lines.slice(0, -1).map((l) => l.replace(/\s+--.*$/, '').replace(/\s+/g, ' ')).sort(), [
      'parameter /linuxbench/fleet/stale1/ANTHROPIC_API_KEY',
      'queue lb-fleet-stale1-dlq',
      'queue lb-fleet-stale1-done',
      'queue lb-fleet-stale1-work',
    ]);
    for (const l of lines.slice(0, -1)) assert.match(l, /-- abandoned: no progress for \d+ min, 3 job\(s\) unfinished$/);
    assert.match(lines.at(-1)!, /4 leftover\(s\) in us-east-1 \(alice\); run again with --yes to remove them/);
  });

  test('--yes removes its queues and secrets and keeps its results; the fresh fleet stays', async () => {
    const r = await ct(alice, ['cloud', 'cleanup', '--yes']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /removed 4 of 4 leftover\(s\)/);
    const q = await queues();
    assert.deepEqual(q.filter((n) => n.includes('stale1')), []);
    for (const kept of ['lb-fleet-fresh1-work', 'lb-fleet-busy1-work', 'lb-fleet-stale2-work']) assert.ok(q.includes(kept), kept);
    assert.deepEqual(await parameters(), ['/linuxbench/fleet/fresh1/ANTHROPIC_API_KEY', '/linuxbench/fleet/stale2/ANTHROPIC_API_KEY']);
    assert.deepEqual(await objects('stale1'), ['stale1/j0.eval', 'stale1/logs/w1-worker.log', 'stale1/manifest.json']);
    const again = await ct(alice, ['cloud', 'cleanup']);
    assert.equal(again.stdout, 'nothing left behind in us-east-1 (alice)\n');
  });

  test("--delete-results --yes also deletes the abandoned fleet's objects", async () => {
    const list = await ct(bob, ['cloud', 'cleanup', '--delete-results', '--json']);
    assert.equal(list.code, 0, list.stderr);
    const { leftovers } = JSON.parse(list.stdout) as { leftovers: Array<{ kind: string; label: string; fleetId: string }> };
    assert.deepEqual(leftovers.map((l) => `${l.kind} ${l.fleetId}`).sort(), ['parameter stale2', 'queue stale2', 'queue stale2', 'queue stale2', 'results stale2']);
    assert.match(leftovers.find((l) => l.kind === 'results')!.label, /^s3:\/\/lb-fleet-results-migrated\/stale2\/ \(3 object\(s\), 1 result\(s\)\)$/);
    const r = await ct(bob, ['cloud', 'cleanup', '--delete-results', '--yes']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /removed 5 of 5 leftover\(s\)/);
    assert.deepEqual(await objects('stale2'), []);
    assert.deepEqual((await queues()).filter((n) => n.includes('stale2')), []);
    assert.deepEqual(await objects('stale1'), ['stale1/j0.eval', 'stale1/logs/w1-worker.log', 'stale1/manifest.json'], "alice's results stay");
  });
});

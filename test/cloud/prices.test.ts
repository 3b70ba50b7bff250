/**
 * The EC2 price table (data/ec2-prices.json) and the fleet estimate's instance-hours x price:
 * overrides by config and --price, and an unknown instance type refused with exit 2 before
 * anything is created in AWS (moto stays empty).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { instancePrice, priceTable } from '../../src/cloud/prices.js';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { ec2WorkerOverhead, ec2WorkerPrice, estimateFleet, estimateJson, formatEstimate } from '../../src/fleet/estimate.js';
import { runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';

describe('EC2 price table', () => {
  test('has its as-of date and source, and the common families with sizes that match their names', () => {
    const t = priceTable();
    assert.match(t.as_of, /^\d{4}-\d{2}-\d{2}$/);
    assert.match(t.source, /aws\.amazon\.com/);
    for (const family of ['t3', 'm5', 'm6i', 'c5', 'c6i', 'c7i', 'r5']) {
      assert.ok(Object.keys(t.types).some((k) => k.startsWith(`${family}.`)), family);
    }
    for (const [type, row] of Object.entries(t.types)) {
      const size = type.split('.')[1]!;
      const m = /^(\d+)xlarge$/.exec(size);
      if (m && !type.startsWith('t3.')) assert.equal(row.vcpu, Number(m[1]) * 4, type);
      assert.ok(Object.values(row.usd_per_hour).every((p) => p > 0.001 && p < 20), type);
    }
    assert.equal(t.types['c7i.4xlarge']!.usd_per_hour['us-east-1'], 0.714);
    assert.deepEqual([t.types['c7i.4xlarge']!.vcpu, t.types['c7i.4xlarge']!.memory_gib], [16, 32]);
  });

  test('spot is the table fraction of on demand; config fleet.prices and --price win over the table', () => {
    const base = { region: 'us-east-1', prices: {} };
    assert.equal(instancePrice('c7i.4xlarge', { ...base, spot: false }).usdPerHour, 0.714);
    assert.equal(instancePrice('c7i.4xlarge', { ...base, spot: true }).usdPerHour, Math.round(0.714 * priceTable().spot_fraction * 1e4) / 1e4);
    assert.equal(instancePrice('c7i.4xlarge', { ...base, spot: true, prices: { 'c7i.4xlarge': 0.3 } }).usdPerHour, 0.3);
    assert.equal(instancePrice('c7i.4xlarge', { ...base, spot: true, prices: { 'c7i.4xlarge': 0.3 }, pricePerHour: 0.25 }).usdPerHour, 0.25);
    assert.throws(() => instancePrice('z9.mega', { ...base, spot: true }), (e: unknown) => e instanceof ConfigError && /no price known for instance type z9\.mega.*--price USD_PER_HOUR/.test(e.message));
    assert.throws(() => instancePrice('c7i.4xlarge', { ...base, region: 'ap-south-2', spot: true }), /no price known for c7i\.4xlarge in ap-south-2/);
  });

  test('ct.config.yml fleet.prices and CT_FLEET_PRICE_PER_HOUR are compiled into the config the estimate uses', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ct-prices-'));
    try {
      writeFileSync(join(dir, 'ct.config.yml'), 'fleet:\n  prices:\n    z9.mega: 1.5\n');
      const c = loadConfig({ cwd: dir, env: {} });
      assert.equal(ec2WorkerPrice(c.fleet, { instanceType: 'z9.mega', region: 'us-east-1', spot: true }).usdPerHour, 1.5);
      const withEnv = loadConfig({ cwd: dir, env: { CT_FLEET_PRICE_PER_HOUR: '0.5' } });
      assert.equal(ec2WorkerPrice(withEnv.fleet, { instanceType: 'z9.mega', region: 'us-east-1', spot: true }).usdPerHour, 0.5);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the estimate is instance-hours x the worker-hour price, and says where the price came from', () => {
    const price = instancePrice('c7i.4xlarge', { region: 'us-east-1', prices: {}, spot: false });
    // 45 jobs, 2 workers x 10 at once: 3 waves of 300 s = 900 s; 2 workers -> 0.5 instance-hours.
    const e = estimateFleet({ fleetId: 'f1', jobs: 50, done: 5, workers: 2, perWorker: 10, secondsPerSample: 300, pricePerWorkerHour: price.usdPerHour, priceSource: price.source });
    assert.equal(e.instanceHours, 0.5);
    assert.equal(e.cost, 0.357);
    assert.match(formatEstimate(e, 'EC2 c7i.4xlarge'), /estimated time: ~15 min; estimated cost: \$0\.36 \(0\.5 instance-hours at \$0\.714\/worker-hour; price table as of \d{4}-\d\d-\d\d, on demand\)/);
    assert.match(formatEstimate(e, 'EC2 c7i.4xlarge'), /\n  3 wave\(s\) x ~5 min a sample \(fleet\.estimate_seconds_per_sample\)$/);
  });

  test('EC2 workers are also paid for their boot, their empty polls and their shutdown, each of them', () => {
    const overhead = { bootSeconds: 180, idleSeconds: 60, shutdownSeconds: 15 };
    // The same 45 jobs: 3 waves of 300 s, plus 180 + 60 + 15 s per worker -> 1155 s; 2 workers -> 2310 instance-seconds.
    const e = estimateFleet({ fleetId: 'f1', jobs: 50, done: 5, workers: 2, perWorker: 10, secondsPerSample: 300, overhead, pricePerWorkerHour: 0.714 });
    assert.equal(e.waves, 3);
    assert.equal(e.seconds, 1155);
    assert.equal(e.instanceHours * 3600, 2310);
    assert.equal(e.cost, (2310 / 3600) * 0.714);
    assert.match(
      formatEstimate(e, 'EC2 c7i.4xlarge'),
      /estimated time: ~20 min; estimated cost: \$0\.46 \(0\.6 instance-hours at \$0\.714\/worker-hour\)\n  each worker: ~3 min boot \(fleet\.estimate_boot_seconds\) \+ 3 wave\(s\) x ~5 min a sample \(fleet\.estimate_seconds_per_sample\) \+ ~60 s of empty polls \(fleet\.idle_polls x fleet\.poll_seconds\) \+ ~15 s shutdown \(fleet\.estimate_shutdown_seconds\)$/,
    );
    // A short run: one wave of 4 samples on one worker is 300 s of samples but 555 s paid, 85% more.
    const short = estimateFleet({ fleetId: 'f2', jobs: 4, done: 0, workers: 1, perWorker: 10, secondsPerSample: 300, overhead, pricePerWorkerHour: 1 });
    assert.deepEqual([short.waves, short.seconds, short.instanceHours], [1, 555, 555 / 3600]);
    // Scaled down (as in the instance-harness test): seconds, not minutes.
    const scaled = estimateFleet({ fleetId: 'f3', jobs: 12, done: 0, workers: 2, perWorker: 2, secondsPerSample: 8.5, overhead: { bootSeconds: 41, idleSeconds: 3, shutdownSeconds: 5.5 }, pricePerWorkerHour: 1 });
    assert.equal(scaled.waves, 3);
    assert.ok(Math.abs(scaled.instanceHours * 3600 - 2 * (41 + 3 * 8.5 + 3 + 5.5)) < 1e-9);
    assert.match(formatEstimate(scaled, 'EC2'), /each worker: ~41 s boot .* \+ 3 wave\(s\) x ~9 s a sample .* \+ ~3 s of empty polls .* \+ ~6 s shutdown/);
    // Nothing left to run: no worker, no overhead, nothing paid.
    const none = estimateFleet({ fleetId: 'f4', jobs: 4, done: 4, workers: 1, perWorker: 10, secondsPerSample: 300, overhead, pricePerWorkerHour: 1 });
    assert.deepEqual([none.workers, none.waves, none.seconds, none.instanceHours, none.cost], [0, 0, 0, 0, 0]);
    assert.doesNotMatch(formatEstimate(none, 'EC2'), /each worker/);
    // --estimate --json: the same figures for scripts.
    assert.deepEqual(estimateJson(short), {
      fleet_id: 'f2', jobs: 4, done: 0, remaining: 4, workers: 1, per_worker: 10, waves: 1, seconds_per_sample: 300,
      boot_seconds: 180, idle_seconds: 60, shutdown_seconds: 15, seconds: 555, instance_hours: 555 / 3600, price_per_worker_hour: 1, cost: 555 / 3600,
    });
  });

  test('the overhead comes from the config: fleet.estimate_boot_seconds (180 s), idle_polls x poll_seconds (60 s), estimate_shutdown_seconds (15 s)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ct-overhead-'));
    try {
      assert.deepEqual(ec2WorkerOverhead(loadConfig({ cwd: dir, env: {} }).fleet), { bootSeconds: 180, idleSeconds: 60, shutdownSeconds: 15 });
      writeFileSync(join(dir, 'ct.config.yml'), 'fleet:\n  estimate_boot_seconds: 75\n  estimate_shutdown_seconds: 30\n  estimate_seconds_per_sample: 40\n');
      const fromFile = loadConfig({ cwd: dir, env: {} });
      assert.deepEqual(ec2WorkerOverhead(fromFile.fleet), { bootSeconds: 75, idleSeconds: 60, shutdownSeconds: 30 });
      assert.equal(fromFile.fleet.estimate_seconds_per_sample, 40);
      const fromEnv = loadConfig({
        cwd: dir,
        env: { CT_FLEET_ESTIMATE_BOOT_SECONDS: '41.5', CT_FLEET_ESTIMATE_SHUTDOWN_SECONDS: '5.5', CT_FLEET_ESTIMATE_SECONDS_PER_SAMPLE: '8.5', CT_FLEET_IDLE_POLLS: '3', CT_FLEET_POLL_SECONDS: '1' },
      });
      assert.deepEqual(ec2WorkerOverhead(fromEnv.fleet), { bootSeconds: 41.5, idleSeconds: 3, shutdownSeconds: 5.5 });
      assert.equal(fromEnv.fleet.estimate_seconds_per_sample, 8.5);
      assert.throws(() => loadConfig({ cwd: dir, env: { CT_FLEET_ESTIMATE_BOOT_SECONDS: '-1' } }).fleet, (e: unknown) => e instanceof ConfigError && /estimate_boot_seconds/.test(e.message));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('ct run eval --ec2 with an instance type of unknown price', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('prices');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('exits 2 naming the type and the ways out; nothing is created', async () => {
    // A type EC2 offers (it passes DescribeInstanceTypes) that the table does not list.
    const r = await runCt(['run', 'eval', '--ec2', '--ec2-instance-type', 'x1e.32xlarge', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test', '--estimate'], {
      cwd: dirs.work,
      env: fleetEnv(moto, dirs, { CT_EC2_AMI: 'ami-0123456789abcdef0' }),
    });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /no price known for instance type x1e\.32xlarge .*--price USD_PER_HOUR, or fleet\.prices in ct\.config\.yml/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] });
  });

  test('--price is a fleet flag: refused without --fleet / --ec2', async () => {
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test', '--price', '0.5'], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--price only apply to fleet runs/);
  });
});

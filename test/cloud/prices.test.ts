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
import { ec2WorkerPrice, estimateFleet, formatEstimate } from '../../src/fleet/estimate.js';
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

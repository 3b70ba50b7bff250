/**
 * The ec2 launcher against moto, through a loopback proxy that refuses capacity the way EC2 does
 * (moto never runs out): a refused spot launch is made again on-demand with a new client token;
 * a launch that keeps failing stops after fleet.launch_attempts with EC2's own error.
 */
import assert from 'node:assert/strict';
import { DescribeInstancesCommand, EC2Client } from '@aws-sdk/client-ec2';
import { S3Client } from '@aws-sdk/client-s3';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { ensureEgressOnlySecurityGroup } from '../../src/cloud/security-group.js';
import { CloudError, ConfigError } from '../../src/errors.js';
import { concurrencyFor, instanceSize } from '../../src/fleet/ec2-worker-plan.js';
import { Ec2Launcher, type Ec2LauncherOptions } from '../../src/fleet/ec2-launcher.js';
import { FAKE_AWS } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { seedEc2FleetWorld } from './helpers/ec2-fleet-world.js';

/** Forwards to moto; answers RunInstances that match `refuse` with EC2's capacity error. */
class CapacityProxy {
  refuse: (form: URLSearchParams) => boolean = () => false;
  readonly runInstances: URLSearchParams[] = [];
  private server?: Server;
  constructor(private readonly target: string) {}
  async start(): Promise<string> {
    const target = new URL(this.target);
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const form = new URLSearchParams(body.toString());
        if (form.get('Action') === 'RunInstances') {
          this.runInstances.push(form);
          if (this.refuse(form)) {
            res.writeHead(500, { 'content-type': 'text/xml' });
            res.end(
              '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>InsufficientInstanceCapacity</Code>' +
                '<Message>We currently do not have sufficient c7i.4xlarge capacity in the Availability Zone you requested.</Message></Error></Errors><RequestID>r-1</RequestID></Response>',
            );
            return;
          }
        }
        const up = request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          r.pipe(res);
        });
        up.end(body);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }
  stop(): void {
    this.server?.close();
  }
}

let moto: Moto;
let proxy: CapacityProxy;
let ec2: EC2Client;
let s3: S3Client;
let base: Omit<Ec2LauncherOptions, 'note'>;

before(async () => {
  moto = await startMoto();
  const images = await seedEc2FleetWorld(moto.url, { workerAmi: false });
  proxy = new CapacityProxy(moto.url);
  const url = await proxy.start();
  const credentials = { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY };
  // One attempt per call: the SDK's own retries would hide how many launches were made.
  ec2 = new EC2Client({ region: 'us-east-1', endpoint: url, credentials, maxAttempts: 1 });
  s3 = new S3Client({ region: 'us-east-1', endpoint: moto.url, credentials, forcePathStyle: true });
  base = {
    ec2,
    s3,
    fleetId: 'f00dfeedf00dfeed',
    region: 'us-east-1',
    bucket: 'lb-fleet-results-migrated',
    imageId: images.ubuntu,
    instanceType: 'c7i.4xlarge',
    securityGroupId: await ensureEgressOnlySecurityGroup(ec2, { name: 'linuxbench-fleet-worker-sg' }),
    rootVolumeGb: 100,
    instanceProfile: 'linuxbench-worker',
    launchedBy: 'alice',
    namePrefix: 'linuxbench-',
    spot: true,
    userData: '#!/bin/bash\nshutdown -h now\n',
    launchAttempts: 3,
    bootstrapFailures: 3,
  };
});
after(async () => {
  ec2.destroy();
  s3.destroy();
  proxy.stop();
  await moto.stop();
});

test('spot capacity refused: the launch is made on-demand with a new client token', async () => {
  proxy.runInstances.length = 0;
  proxy.refuse = (f) => f.get('InstanceMarketOptions.MarketType') === 'spot';
  const notes: string[] = [];
  const launcher = new Ec2Launcher({ ...base, note: (l) => notes.push(l) });
  assert.equal(await launcher.start(2), 2);
  assert.equal(launcher.market, 'on-demand');
  assert.equal(proxy.runInstances.length, 2, 'one spot try, one on-demand');
  const [spot, onDemand] = proxy.runInstances;
  assert.equal(spot!.get('InstanceMarketOptions.MarketType'), 'spot');
  assert.equal(onDemand!.get('InstanceMarketOptions.MarketType'), null);
  assert.notEqual(spot!.get('ClientToken'), onDemand!.get('ClientToken'));
  for (const f of [spot!, onDemand!]) {
    assert.equal(f.get('MinCount'), '2');
    assert.equal(f.get('MaxCount'), '2');
  }
  assert.ok(notes.some((n) => /no spot capacity for c7i\.4xlarge \(InsufficientInstanceCapacity\): launching on-demand instead/.test(n)), notes.join('\n'));
  const r = await ec2.send(new DescribeInstancesCommand({ InstanceIds: launcher.names() }));
  const inst = (r.Reservations ?? []).flatMap((x) => x.Instances ?? []);
  assert.equal(inst.length, 2);
  assert.ok(inst.every((i) => i.InstanceLifecycle !== 'spot'));
  await launcher.stopAll();
  assert.equal(await launcher.alive(), 0);
});

test('workers answer metadata with session tokens only and a hop limit of 1, so no container reaches the role', async () => {
  proxy.runInstances.length = 0;
  proxy.refuse = () => false;
  const launcher = new Ec2Launcher({ ...base, spot: false, note: () => {} });
  assert.equal(await launcher.start(1), 1);
  const asked = proxy.runInstances[0]!;
  assert.equal(asked.get('MetadataOptions.HttpTokens'), 'required');
  assert.equal(asked.get('MetadataOptions.HttpPutResponseHopLimit'), '1');
  // The user-data halts the instance when its worker exits (done, idle for fleet.idle_minutes): halting ends it.
  assert.equal(asked.get('InstanceInitiatedShutdownBehavior'), 'terminate');
  const r = await ec2.send(new DescribeInstancesCommand({ InstanceIds: launcher.names() }));
  const [inst] = (r.Reservations ?? []).flatMap((x) => x.Instances ?? []);
  assert.equal(inst?.MetadataOptions?.HttpTokens, 'required');
  assert.equal(inst?.MetadataOptions?.HttpPutResponseHopLimit, 1);
  await launcher.stopAll();
});

test('no capacity at all: 3 launches in a row, then EC2 error, nothing left running', async () => {
  proxy.runInstances.length = 0;
  proxy.refuse = () => true;
  const launcher = new Ec2Launcher({ ...base, spot: false, note: () => {} });
  await assert.rejects(launcher.start(1), (e) => e instanceof CloudError && /failed 3 times in a row: InsufficientInstanceCapacity: We currently do not have sufficient/.test(e.message));
  assert.equal(proxy.runInstances.length, 3);
  assert.ok(proxy.runInstances.every((f) => f.get('InstanceMarketOptions.MarketType') === null), '--on-demand never asks for spot');
  assert.deepEqual(launcher.names(), []);
});

test('per-worker concurrency from the instance type (DescribeInstanceTypes): c7i.4xlarge runs 10', async () => {
  const size = await instanceSize(ec2, 'c7i.4xlarge');
  assert.deepEqual(size, { vcpus: 16, memoryGiB: 32 });
  assert.equal(concurrencyFor(size), 10);
  assert.equal(concurrencyFor({ vcpus: 2, memoryGiB: 1 }), 1, 'at least one');
  assert.equal(concurrencyFor({ vcpus: 96, memoryGiB: 64 }), 21, 'memory bounds it');
  await assert.rejects(instanceSize(ec2, 'c7i.nonesuch'), (e) => e instanceof ConfigError && /unknown instance type c7i\.nonesuch/.test(e.message));
});

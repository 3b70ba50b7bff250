/**
 * A fleet under AWS faults: ct talks to moto through a loopback proxy that faults a seeded ~5% of
 * every call (dropped connections before and after the call, delays, throttling, 5xx, and the
 * AWS-only errors moto never gives). Each fault is checked to reach the SDK as AWS words it; then
 * the controller is killed while merging and the same command run again. (The fleet of EC2
 * workers under 5% faults is ec2-fleet-faults.test.ts.) Set CT_FAULT_SEED to replay a failing run.
 */
import { ChangeMessageVisibilityCommand, CreateQueueCommand, DeleteMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { awsErrorName, isRetryableAwsError } from '../../src/errors.js';
import { finished, onlyLog, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, ctProjects, fleetEnv, fleetWorkDir, motoContents, readEvents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { startAwsFaultProxy, type FaultKind } from './helpers/aws-fault-proxy.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const SEED = Number(process.env.CT_FAULT_SEED ?? 13013);

function clients(url: string): { sqs: SQSClient; s3: S3Client } {
  const common = { region: 'us-east-1', endpoint: url, maxAttempts: 1, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } };
  return { sqs: new SQSClient(common), s3: new S3Client({ ...common, forcePathStyle: true }) };
}

function readIf(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits until `fn` holds, polling every 50 ms. */
async function until(what: string, fn: () => boolean, timeoutMs = 180_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The error a call failed with (the test fails if it succeeded). */
async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail('the call succeeded through a proxy faulting every call');
}

describe('AWS faults between ct and moto', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('faults');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('each injected fault reaches the AWS SDK as AWS words it, and ct classifies it for retry', async () => {
    await moto.reset();
    const direct = clients(moto.url);
    const url = (await direct.sqs.send(new CreateQueueCommand({ QueueName: 'wire' }))).QueueUrl!;
    const /** kind, the action it is drawn for, and what the SDK must see */ cases: Array<[FaultKind, (c: ReturnType<typeof clients>) => Promise<unknown>, RegExp, boolean]> = [
        ['throttle', (c) => c.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' })), /^ThrottlingException$/, true],
        ['throttle', (c) => c.s3.send(new PutObjectCommand({ Bucket: 'b', Key: 'k', Body: 'x' })), /^SlowDown$/, true],
        ['5xx', (c) => c.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' })), /^(InternalError|ServiceUnavailable)$/, true],
        ['5xx', (c) => c.s3.send(new GetObjectCommand({ Bucket: 'b', Key: 'k' })), /^(InternalError|ServiceUnavailable)$/, true],
        ['aws-only', (c) => c.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: 'h' })), /^ReceiptHandleIsInvalid$/, false],
        ['aws-only', (c) => c.sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: 'h', VisibilityTimeout: 5 })), /^(ReceiptHandleIsInvalid|MessageNotInflight)$/, false],
        ['aws-only', (c) => c.sqs.send(new CreateQueueCommand({ QueueName: 'again' })), /^QueueDeletedRecently$/, true],
        ['drop', (c) => c.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' })), /./, true],
        ['drop-after', (c) => c.s3.send(new HeadObjectCommand({ Bucket: 'b', Key: 'k' })), /./, true],
      ];
    for (const [kind, call, name, retryable] of cases) {
      const proxy = await startAwsFaultProxy({ target: moto.url, rate: 1, seed: SEED, kinds: [kind] });
      const c = clients(proxy.url);
      try {
        const e = await failure(call(c));
        const got = awsErrorName(e) || (e as Error).name;
        assert.match(got, name, `${kind}: ${String(e)}`);
        assert.equal(isRetryableAwsError(e), retryable, `${kind} ${got}: retryable`);
        assert.equal(proxy.totalFaults(), 1, `${kind}: one fault counted`);
      } finally {
        c.sqs.destroy();
        c.s3.destroy();
        await proxy.stop();
      }
    }
    // Off where AWS never sends them: no AWS-only error for a call that cannot get one.
    const proxy = await startAwsFaultProxy({ target: moto.url, rate: 1, seed: SEED, kinds: ['aws-only'] });
    const c = clients(proxy.url);
    await c.sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'x' }));
    assert.equal(proxy.totalFaults(), 0);
    c.sqs.destroy();
    c.s3.destroy();
    await proxy.stop();
    direct.sqs.destroy();
    direct.s3.destroy();
  });

  test('the controller SIGKILLed while merging: no partial log in the log dir; the same command again merges one log, nothing lost or twice', { timeout: 420_000 }, async () => {
    await moto.reset();
    // Every result download takes 2-2.5 s, so the merge lasts long enough to be killed in.
    const slowGets = await startAwsFaultProxy({ target: moto.url, rate: 1, seed: SEED, kinds: ['delay'], actions: ['s3:GetObject'], delayMs: [2000, 2500] });
    const logDir = testLogDir('fleet-kill-merge');
    const jobs = 16;
    const args = ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', String(jobs), '--max-samples', '2', '--log-dir', logDir, '--yes'];
    const pids: number[] = [];
    const started = Date.now();
    try {
      const child = startCt(args, { cwd: dirs.work, env: fleetEnv({ ...moto, url: slowGets.url }, dirs) });
      pids.push(child.pid!);
      const done = finished(child);
      const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
      const fleetDir = join(logDir, 'fleet', /fleet ([0-9a-f]{16})/.exec(head)![1]!);
      await until('the merge to start', () => existsSync(join(fleetDir, 'merging.eval')));
      child.kill('SIGKILL');
      await done;
      for (const f of readdirSync(fleetDir).filter((n) => n.startsWith('worker-'))) {
        const m = /\(pid (\d+)\)/.exec(readIf(join(fleetDir, f)));
        if (m) pids.push(Number(m[1]));
      }
      const events = readEvents(readIf(join(fleetDir, 'events.jsonl')));
      assert.equal(events.filter((e) => e.event === 'job_done').length, jobs, 'every job finished before the kill');
      assert.ok(!events.some((e) => e.event === 'merge'), 'killed before the merge ended');
      assert.deepEqual(readdirSync(logDir).filter((n) => n.endsWith('.eval')), [], 'no partial log in the log dir');

      // What a user does: the same command again (through a proxy that only counts calls).
      const counting = await startAwsFaultProxy({ target: moto.url, rate: 0, seed: SEED });
      const r = await runCt(args, { cwd: dirs.work, env: fleetEnv({ ...moto, url: counting.url }, dirs), timeoutMs: 180_000 }).finally(() => counting.stop());
      // Every job has its result: no queue is created (on AWS, re-creating a name deleted less
      // than 60 s ago fails with QueueDeletedRecently), only the merge is redone.
      assert.equal(counting.calls.get('sqs:CreateQueue'), undefined, 'no queue created when every job is finished');
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stderr, new RegExp(`resuming fleet [0-9a-f]{16}: ${jobs} of ${jobs} job\\(s\\) already finished`));
      assert.match(r.stdout, /0 job\(s\) enqueued, 0 worker\(s\) launched/);
      const [log] = await readWithInspect([onlyLog(logDir)]);
      const keys = log!.samples.map((s) => `${s.id}#${s.epoch}`);
      const lost = jobs - new Set(keys).size;
      const duplicated = keys.length - new Set(keys).size;
      console.log(`controller SIGKILLed while merging ${jobs} results: resumed, ${lost} lost, ${duplicated} duplicated; wall ${((Date.now() - started) / 1000).toFixed(0)} s`);
      assert.equal(lost, 0);
      assert.equal(duplicated, 0);
      assert.equal(existsSync(join(fleetDir, 'merging.eval')), false, 'no partial merge left behind');
      assert.deepEqual((await motoContents(moto)).queues, [], 'no queue left');
      await until("the first controller's workers leaving", () => pids.every((p) => !alive(p)), 60_000);
      assert.deepEqual(ctProjects('create-greeting'), [], 'no sandbox left');
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
      await slowGets.stop();
    }
  });
});

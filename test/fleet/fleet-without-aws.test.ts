/**
 * A fleet without AWS: `--workers local:2` and `--workers external` on ElasticMQ (SQS) and
 * versitygw (S3), with AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_S3 and no other endpoint or
 * account. Every AWS call ct makes is recorded (CT_AWS_CALL_LOG): only SQS and S3, never STS, SSM,
 * EC2 or IAM. `--sandbox local --policy test`, so it needs no Docker.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { finished, onlyLog, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FLEET_TEST_TIMINGS, fleetWorkDir, registerDemoSetting } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { queueStoreFleetEnv, startQueueStore, type QueueStore } from '../helpers/queue-store.js';

const RUN = ['run', 'eval', '--fleet', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '--sandbox', 'local', '--policy', 'test', '--yes'];

describe('a fleet without AWS, on ElasticMQ and versitygw', () => {
  let servers: QueueStore;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let calls: string;

  before(async () => {
    servers = await startQueueStore();
    dirs = fleetWorkDir('no-aws');
    calls = mkdtempSync(join(tmpdir(), 'ct-no-aws-calls-'));
  });
  after(async () => {
    await servers?.stop();
    rmSync(dirs.work, { recursive: true, force: true });
    rmSync(calls, { recursive: true, force: true });
  });

  const env = (extra: Record<string, string> = {}) => queueStoreFleetEnv(servers, dirs, FLEET_TEST_TIMINGS, extra);

  /** The SDK clients and commands ct used, from the call log. */
  function services(file: string): string[] {
    const lines = readFileSync(file, 'utf8').trim().split('\n').filter(Boolean);
    return [...new Set(lines.map((l) => (JSON.parse(l) as { client: string }).client))].sort();
  }

  test('local:2 workers: every job once, one merged log inspect reads, only SQS and S3 called', async () => {
    const logDir = testLogDir('fleet-no-aws-local');
    const log = join(calls, 'local.jsonl');
    const r = await runCt([...RUN, '--workers', 'local:2', '--epochs', '5', '--log-dir', logDir], { cwd: dirs.work, env: env({ CT_AWS_CALL_LOG: log }), timeoutMs: 180_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /queues and results on http:\/\/127\.0\.0\.1:\d+ and http:\/\/127\.0\.0\.1:\d+ \(no other AWS service is called\)/);
    assert.match(r.stdout, /10 job\(s\) enqueued, 2 worker\(s\) launched/);
    assert.match(r.stdout, /success: 10 sample\(s\)/);
    const [merged] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(merged!.status, 'success');
    const keys = merged!.samples.map((s) => `${s.id}#${s.epoch}`);
    assert.equal(keys.length, 10);
    assert.equal(new Set(keys).size, 10, 'one sample per job');
    assert.deepEqual(services(log), ['S3Client', 'SQSClient']);
  });

  test('an external worker with --secrets env: the controller stores no secret anywhere, the worker takes its keys from its own environment', async () => {
    const logDir = testLogDir('fleet-no-aws-external');
    const log = join(calls, 'external.jsonl');
    const key = 'sk-ant-api03-' + 'x'.repeat(40);
    // External workers pull the settings from git, at the commit the controller pins.
    registerDemoSetting(dirs);
    const controller = startCt([...RUN, '--workers', 'external', '--epochs', '2', '--log-dir', logDir], { cwd: dirs.work, env: env({ CT_AWS_CALL_LOG: log, ANTHROPIC_API_KEY: key }) });
    // Listened to from the start: it exits (the fleet done) before the worker does.
    const controllerDone = finished(controller);
    const started = await waitForOutput(controller, (t) => /ct fleet worker --fleet [0-9a-f]{16}/.test(t), 120_000);
    const fleetId = /ct fleet worker --fleet ([0-9a-f]{16})/.exec(started)![1]!;
    assert.match(started, /workers take API keys from their own environment \(ct fleet worker --secrets env\)/);
    const workerLog = join(calls, 'worker.log');
    const worker = startCt(['fleet', 'worker', '--fleet', fleetId, '--concurrency', '2'], { cwd: dirs.work, env: env({ CT_AWS_CALL_LOG: log }) });
    const w = await finished(worker);
    writeFileSync(workerLog, w.stderr);
    assert.equal(w.code, 0, w.stderr);
    assert.match(w.stderr, /no SSM on a fleet without AWS/);
    const c = await controllerDone;
    assert.equal(c.code, 0, `${c.stdout}\n${c.stderr}`);
    assert.match(c.stdout, /success: 4 sample\(s\)/);
    assert.deepEqual(services(log), ['S3Client', 'SQSClient']);
    assert.doesNotMatch(readFileSync(log, 'utf8'), new RegExp(key), 'no key in any call');
  });
});

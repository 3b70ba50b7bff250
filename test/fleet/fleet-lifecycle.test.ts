/**
 * The fleet's everyday operations, as a user meets them (moto, Docker, the real CLI, timeouts
 * scaled down): stopping and resuming never queues a job twice nor starts its sandbox twice; a
 * polite stop of a worker spends no attempt; a rerun retries what ended in error; the
 * controller's death ends its local workers; --new-fleet says what it drops.
 */
import assert from 'node:assert/strict';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { finished, onlyLog, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, alive, fleetEnv, fleetWorkDir, readEvents, readIf, registerDemoSetting, until } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';

/** Lines where a worker started a job's sandbox, across every worker log of a fleet. */
function sandboxStarts(fleetDir: string): string[] {
  if (!existsSync(fleetDir)) return [];
  return readdirSync(fleetDir)
    .filter((f) => /^worker-\d+\.log$/.test(f))
    .flatMap((f) => readFileSync(join(fleetDir, f), 'utf8').split('\n'))
    .filter((l) => / job \S+ started: /.test(l));
}

describe('fleet lifecycle: stop, resume, retry without paying twice', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let slow: string;
  const children: ChildProcess[] = [];
  const pids: number[] = [];

  /** Messages on a fleet's work queue (visible + in flight + delayed). */
  async function workMessages(fleetId: string): Promise<number> {
    const sqs = new SQSClient({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });
    try {
      const url = (await sqs.send(new GetQueueUrlCommand({ QueueName: `lb-fleet-${fleetId}-work` }))).QueueUrl!;
      const a = (
        await sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] }),
        )
      ).Attributes!;
      return Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible) + Number(a.ApproximateNumberOfMessagesDelayed);
    } finally {
      sqs.destroy();
    }
  }

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('lifecycle');
    slow = join(dirs.work, 'slow.jsonl');
    writeFileSync(
      slow,
      '{"function": "bash", "arguments": {"cmd": "sleep 5"}}\n' +
        '{"function": "text_editor", "arguments": {"command": "create", "path": "/app/greeting.txt", "file_text": "hello, notes\\n"}}\n' +
        '{"function": "submit", "arguments": {"answer": "done"}}\n',
    );
    // External workers pull settings: the demo setting is a registered git repository here. A
    // sandbox that cannot start fails its attempt at once (no start retries inside the attempt).
    registerDemoSetting(dirs, 'sandbox:\n  start_attempts: 1\n');
  });
  after(async () => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('Ctrl-C and the same command again, twice: the queue holds one message per job, and finishing starts each job\'s sandbox once', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-lifecycle-resume');
    const args = (workers: string) => ['run', 'eval', '--fleet', '--workers', workers, '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--epochs', '4', '--max-samples', '2', '--log-dir', logDir, '--yes'];
    const env = fleetEnv(moto, dirs);
    let fleetId = '';
    for (const round of [1, 2]) {
      const child = startCt(args('external'), { cwd: dirs.work, env });
      children.push(child);
      const done = finished(child);
      const head = await waitForOutput(child, (t) => /start workers on your machines with/.test(t));
      fleetId = /fleet ([0-9a-f]{16})/.exec(head)![1]!;
      if (round === 1) assert.match(head, /4 job\(s\) queued, 0 external worker\(s\) started/);
      else assert.match(head, /0 job\(s\) queued, 4 still queued from before/);
      child.kill('SIGINT');
      const r = await done;
      assert.equal(r.code, 130, r.stderr);
      assert.match(r.stderr, /run the same command again to resume/);
      assert.equal(await workMessages(fleetId), 4, `after round ${round}: one message per job`);
    }
    const r = await runCt(args('local:2'), { cwd: dirs.work, env, timeoutMs: 180_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /0 job\(s\) queued, 4 still queued from before, 2 local worker\(s\) started/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => s.epoch).sort(), [1, 2, 3, 4]);
    const starts = sandboxStarts(join(logDir, 'fleet', fleetId));
    assert.equal(starts.length, 4, `one sandbox start per job:\n${starts.join('\n')}`);
  });

  test('SIGINT one worker, SIGTERM the next, SIGKILL a third: no attempt spent on the polite stops, the job finishes on the fourth', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-lifecycle-handback');
    const env = fleetEnv(moto, dirs);
    const controller = startCt(['run', 'eval', '--fleet', '--workers', 'external', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env });
    children.push(controller);
    const done = finished(controller);
    const head = await waitForOutput(controller, (t) => /start workers on your machines with/.test(t));
    const fleetId = /fleet ([0-9a-f]{16})/.exec(head)![1]!;
    const worker = (n: number) => {
      const w = startCt(['fleet', 'worker', '--fleet', fleetId, '--region', 'us-east-1', '--secrets', 'env'], { cwd: dirs.work, env: { ...env, CT_WORKER_NAME: `w${n}` } });
      children.push(w);
      return w;
    };
    for (const [n, signal] of [[1, 'SIGINT'], [2, 'SIGTERM'], [3, 'SIGKILL']] as const) {
      const w = worker(n);
      const out = finished(w);
      await waitForOutput(w, (t) => /job \S+ started: .*\(attempt (\d) of 3\)/.test(t));
      await new Promise((r) => setTimeout(r, 1000));
      w.kill(signal);
      const r = await out;
      if (signal !== 'SIGKILL') {
        assert.match(r.stderr, /\(attempt 1 of 3\)/, `worker ${n} ran the job's first attempt`);
        assert.match(r.stderr, /handed back \(the worker is stopping\): queued again, no attempt spent/);
      }
    }
    // The SIGKILLed worker's delivery returns after its visibility (6 s): that one counts.
    const last = worker(4);
    const lastOut = await finished(last);
    assert.match(lastOut.stderr, /\(attempt 2 of 3\)/);
    const r = await done;
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.samples.length, 1);
    assert.equal(log!.samples[0]!.error, null);
    const events = readEvents(readFileSync(join(logDir, 'fleet', fleetId, 'events.jsonl'), 'utf8'));
    // Two hand-backs at least: a stopping worker's long poll (never aborted) may still bring it the
    // job it just queued again, which it hands back once more — still no attempt spent.
    const handBacks = events.filter((e) => e.event === 'handed_back');
    assert.ok(handBacks.length >= 2, `hand-backs recorded: ${handBacks.length}`);
    assert.ok(handBacks.every((e) => e.attempt === 1), 'every hand-back was of the first attempt');
    assert.doesNotMatch(r.stderr, /workers \?/, 'external workers are counted by their reports');
    assert.match(r.stderr, /workers [1-9]/);
    assert.ok(!events.some((e) => e.event === 'job_dead'));
  });

  test('the controller SIGKILLed: its local workers hand their jobs back and stop within a poll; the same command finishes them on their first attempt', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-lifecycle-orphans');
    const args = ['run', 'eval', '--fleet', '--workers', 'local:1', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--epochs', '2', '--max-samples', '2', '--log-dir', logDir, '--yes'];
    const child = startCt(args, { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    children.push(child);
    const done = finished(child);
    const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
    const fleetDir = join(logDir, 'fleet', /fleet ([0-9a-f]{16})/.exec(head)![1]!);
    const workerLog = () => readIf(join(fleetDir, 'worker-1.log'));
    await until('the worker running both jobs', () => (workerLog().match(/ job \S+ started: /g) ?? []).length === 2);
    const pid = Number(/\(pid (\d+)\)/.exec(workerLog())![1]);
    pids.push(pid);
    child.kill('SIGKILL');
    await done;
    const t0 = Date.now();
    await until('the orphaned worker to stop', () => !alive(pid), 30_000);
    const stoppedIn = (Date.now() - t0) / 1000;
    assert.ok(stoppedIn < 20, `the worker stopped ${stoppedIn}s after its controller died`);
    assert.match(workerLog(), /the controller that started this worker is gone/);
    assert.equal((workerLog().match(/handed back \(the worker is stopping\)/g) ?? []).length, 2);
    const r = await runCt(args, { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 120_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => s.epoch).sort(), [1, 2]);
    const second = readIf(join(fleetDir, 'worker-2.log')) || readIf(join(fleetDir, 'worker-1.log'));
    assert.match(second, /started: .*\(attempt 1 of 3\)/, 'the handed-back jobs spent no attempt');
  });

  test('a rerun retries the job that was dead-lettered (its image was missing), keeps the rest, and says so; --no-retry-errors keeps it', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-lifecycle-retry');
    const image = `ct-test-missing-${process.pid}:latest`;
    // A task of its own environment whose image does not exist yet (never pulled).
    const envDir = join(dirs.settings, 'demo', 'notes_app');
    const broken = join(dirs.settings, 'demo', 'broken_app');
    execFileSync('cp', ['-r', envDir, broken]);
    writeFileSync(join(broken, 'codebase', 'compose.yml'), `services:\n  default:\n    image: ${image}\n    pull_policy: never\n    command: ["sleep", "infinity"]\n    init: true\n    working_dir: /app\n`);
    const demo = join(dirs.settings, 'demo');
    execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', 'add', '-A'], { cwd: demo });
    execFileSync('git', ['-c', 'user.email=t@example.com', '-c', 'user.name=t', 'commit', '-qm', 'broken_app'], { cwd: demo });
    const args = ['run', 'eval', '--fleet', '--workers', 'local:1', '-e', 'notes_app', '-e', 'broken_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow.replace('slow', 'quick'), '--log-dir', logDir, '--yes'];
    writeFileSync(slow.replace('slow', 'quick'), '{"function": "text_editor", "arguments": {"command": "create", "path": "/app/greeting.txt", "file_text": "hello, notes\\n"}}\n{"function": "submit", "arguments": {"answer": "done"}}\n');
    const env = fleetEnv(moto, dirs);
    try {
      const first = await runCt(args, { cwd: dirs.work, env, timeoutMs: 180_000 });
      assert.equal(first.code, 1, `${first.stdout}\n${first.stderr}`);
      assert.match(first.stdout, /failed jobs \(1\):\n  broken_app\.create_greeting\.e1:/);
      const kept = await runCt([...args, '--no-retry-errors'], { cwd: dirs.work, env, timeoutMs: 60_000 });
      assert.equal(kept.code, 1, kept.stderr);
      assert.match(kept.stderr, /keeping 1 error result\(s\)/);
      assert.match(kept.stderr, /\[2\/2\] done 2, failed 1,/, 'the dead-lettered job of the earlier run counts as failed');
      assert.match(kept.stdout, /0 job\(s\) enqueued, 0 worker\(s\) launched/);
      // The cause fixed: the image exists now.
      execFileSync('docker', ['tag', 'debian:bookworm-slim', image]);
      const again = await runCt(args, { cwd: dirs.work, env, timeoutMs: 180_000 });
      assert.equal(again.code, 0, `${again.stdout}\n${again.stderr}`);
      assert.match(again.stderr, /retrying 1 job\(s\) whose result is an error \(1 dead-lettered\)/);
      assert.match(again.stdout, /1 job\(s\) enqueued \(1 error result\(s\) retried\)/);
      const [log] = await readWithInspect([onlyLog(logDir)]);
      assert.deepEqual(log!.samples.map((s) => s.id).sort(), ['broken_app:create_greeting', 'notes_app:create_greeting'], 'each job once');
      assert.ok(log!.samples.every((s) => s.error === null), 'the new result in place of the error');
      assert.equal(log!.status, 'success');
    } finally {
      execFileSync('docker', ['rmi', '-f', image], { stdio: 'ignore' });
      rmSync(broken, { recursive: true, force: true });
    }
  });
});

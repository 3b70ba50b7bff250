/**
 * The fleet's failure table, end to end: local workers against moto and real Docker, with
 * timeouts scaled down (visibility 6 s, polls 1 s, checks 1 s, retry delay 0).
 */
import { SQSClient, GetQueueUrlCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { finished, onlyLog, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, alive, fleetEnv, fleetWorkDir, readEvents, readIf, registerDemoSetting, until } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';

/** A policy that throws on fix_config (every attempt) and submits at once elsewhere. */
const FLAKY_POLICY = `
export const policy = {
  name: 'flaky',
  async run(ctx) {
    if (ctx.sample.mainTask.id === 'fix_config') throw new Error('the policy cannot handle fix_config');
    return { submission: 'done' };
  },
};
`;

/** The worker process ids named in a fleet's worker logs, by log file. */
function workerPids(fleetDir: string, n: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 1; i <= n; i++) {
    const m = /\(pid (\d+)\)/.exec(readIf(join(fleetDir, `worker-${i}.log`)));
    if (m) out[`worker-${i}.log`] = Number(m[1]);
  }
  return out;
}

describe('fleet failure handling (local workers, moto, Docker)', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let slow: string;
  const started: number[] = [];

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('failures');
    // The policy lives in an --extra-src tree: workers import it from the shipped copy.
    mkdirSync(join(dirs.work, 'lib', 'policies', '__pycache__'), { recursive: true });
    writeFileSync(join(dirs.work, 'lib', 'policies', 'flaky-policy.mjs'), FLAKY_POLICY);
    writeFileSync(join(dirs.work, 'lib', 'policies', '__pycache__', 'junk.pyc'), 'not shipped');
    // A task whose scorer says the environment is not ready: the sample's own failure.
    const t = join(dirs.settings, 'demo', 'notes_app', 'main_tasks', 'not_ready');
    mkdirSync(t, { recursive: true });
    writeFileSync(join(t, 'info.yml'), 'name: Not ready\ntask_category: fix_bug\nshort_description: x\nscorer_description: x\ncoverage: x\ndescription:\n  file: requirements.md\n');
    writeFileSync(join(t, 'requirements.md'), 'Nothing to do.\n');
    writeFileSync(join(t, 'scorer.sh'), 'echo "NOT_READY: the database never came up"\n');
    // A replay that takes a few seconds, so a sample can be interrupted while it runs.
    slow = join(dirs.work, 'slow.jsonl');
    writeFileSync(
      slow,
      '{"function": "bash", "arguments": {"cmd": "sleep 4"}}\n' +
        '{"function": "text_editor", "arguments": {"command": "create", "path": "/app/greeting.txt", "file_text": "hello, notes\\n"}}\n' +
        '{"function": "submit", "arguments": {"answer": "done"}}\n',
    );
    // External workers pull settings: the demo setting is a registered git repository here.
    registerDemoSetting(dirs);
  });
  after(async () => {
    for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('a job that fails every time is dead-lettered and reported; a NOT_READY sample is a result; the run completes with exit 1', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-dlq');
    const r = await runCt(
      ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '-t', 'not_ready', '--policy', 'flaky-policy.mjs:policy', '--extra-src', 'lib/policies', '--log-dir', logDir, '--yes'],
      { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 180_000 },
    );
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /failed jobs \(1\):\n  notes_app\.fix_config\.e1:\n    the job failed on all 3 attempt\(s\) on local-\d(, local-\d)?; last error: policy \S+ failed: the policy cannot handle fix_config/);
    assert.match(r.stdout, /samples with errors \(1\):\n  notes_app\.not_ready\.e1:\n    .*environment not ready/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => s.id).sort(), ['notes_app:create_greeting', 'notes_app:fix_config', 'notes_app:not_ready']);
    const dead = log!.samples.find((s) => s.id === 'notes_app:fix_config')!;
    assert.match(dead.error!, /failed on all 3 attempt\(s\) on local-/);
    const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stdout)![1]!;
    const events = readEvents(readFileSync(join(logDir, 'fleet', fleetId, 'events.jsonl'), 'utf8'));
    assert.equal(events.filter((e) => e.event === 'job_failed' && e.job_id === 'notes_app.fix_config.e1').length, 3, 'three attempts');
    assert.equal(events.filter((e) => e.event === 'job_failed' && e.job_id !== 'notes_app.fix_config.e1').length, 0, 'NOT_READY is not retried');
    assert.ok(events.some((e) => e.event === 'job_dead' && e.job_id === 'notes_app.fix_config.e1'));
    const worker = readFileSync(join(logDir, 'fleet', fleetId, 'worker-1.log'), 'utf8');
    assert.match(worker, /extra-src policies unpacked in /, 'the policy came from the shipped tree');
    // Rerunning the finished fleet with --no-retry-errors queues nothing: the dead job has its error result.
    const again = await runCt(
      ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '-t', 'not_ready', '--policy', 'flaky-policy.mjs:policy', '--extra-src', 'lib/policies', '--log-dir', logDir, '--yes', '--no-retry-errors'],
      { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 60_000 },
    );
    assert.equal(again.code, 1);
    assert.match(again.stdout, /0 job\(s\) enqueued, 0 worker\(s\) launched/);
  });

  test('all workers SIGKILLed mid-sample: replacements start, jobs are redelivered and finished once, no sandbox is left', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-kill');
    const child = startCt(
      ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--epochs', '4', '--max-samples', '1', '--log-dir', logDir, '--yes'],
      { cwd: dirs.work, env: fleetEnv(moto, dirs) },
    );
    started.push(child.pid!);
    const done = finished(child);
    const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
    const fleetDir = join(logDir, 'fleet', /fleet ([0-9a-f]{16})/.exec(head)![1]!);
    const logs = () => [1, 2].map((i) => readIf(join(fleetDir, `worker-${i}.log`)));
    await until('both workers running a sample', () => logs().every((l) => /job \S+ started/.test(l)));
    await new Promise((r) => setTimeout(r, 2000));
    const pids = workerPids(fleetDir, 2);
    const runs = logs().map((l) => /sandbox run ([0-9a-f]{8})/.exec(l)![1]!);
    for (const pid of Object.values(pids)) process.kill(pid, 'SIGKILL');
    const r = await done;
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    // Both are replaced: at once, or one at a time when the controller's check saw one exit before the other.
    const replaced = [...r.stderr.matchAll(/(?:no worker is running|\d worker\(s\) running, fewer than wanted,) and \d job\(s\) remain: started (\d) replacement worker\(s\)/g)].reduce((n, m) => n + Number(m[1]), 0);
    assert.ok(replaced >= 2, `two replacement workers started:\n${r.stderr}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => `${s.id}#${s.epoch}`).sort(), [1, 2, 3, 4].map((e) => `notes_app:create_greeting#${e}`));
    assert.ok(log!.samples.every((s) => !s.error));
    const events = readEvents(readFileSync(join(fleetDir, 'events.jsonl'), 'utf8'));
    assert.ok(events.some((e) => e.event === 'replace'));
    const left = execFileSync('docker', ['ps', '-a', '--format', '{{.Names}}'], { encoding: 'utf8' })
      .split('\n')
      .filter((n) => runs.some((id) => n.startsWith(`ct-${id}-`)));
    assert.deepEqual(left, [], 'the killed workers\' sandboxes were swept');
  });

  test('a worker frozen past its visibility while another finishes the job: exactly one sample', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-stop');
    const child = startCt(
      ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--epochs', '2', '--max-samples', '1', '--log-dir', logDir, '--yes'],
      { cwd: dirs.work, env: fleetEnv(moto, dirs) },
    );
    started.push(child.pid!);
    const done = finished(child);
    const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
    const fleetDir = join(logDir, 'fleet', /fleet ([0-9a-f]{16})/.exec(head)![1]!);
    const logOf = (i: number) => readIf(join(fleetDir, `worker-${i}.log`));
    const first = await until('a worker taking a job', () => [1, 2].find((i) => /job \S+ started/.test(logOf(i))));
    const other = first === 1 ? 2 : 1;
    const pid = workerPids(fleetDir, 2)[`worker-${first}.log`]!;
    process.kill(pid, 'SIGSTOP');
    try {
      await until('the other worker taking the job again', () => /started: .*\(attempt 2 of 3\)/.test(logOf(other)), 60_000);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    const r = await done;
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => s.epoch).sort(), [1, 2], 'exactly one sample per job');
    assert.ok(log!.samples.every((s) => s.error === null));
  });

  test('the controller SIGKILLed while tracking: the same command resumes with nothing lost and nothing twice', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-resume');
    const args = ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--epochs', '6', '--max-samples', '1', '--log-dir', logDir, '--yes'];
    const child = startCt(args, { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    started.push(child.pid!);
    const done = finished(child);
    const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
    const fleetDir = join(logDir, 'fleet', /fleet ([0-9a-f]{16})/.exec(head)![1]!);
    await until('a first finished job', () => readEvents(readIf(join(fleetDir, 'events.jsonl'))).some((e) => e.event === 'job_done'));
    const orphans = Object.values(workerPids(fleetDir, 2));
    started.push(...orphans);
    child.kill('SIGKILL');
    await done;
    const r = await runCt(args, { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 180_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /resuming fleet [0-9a-f]{16}: [1-6] of 6 job\(s\) already finished/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => s.epoch).sort(), [1, 2, 3, 4, 5, 6]);
    await until('the first controller\'s workers leaving', () => orphans.every((p) => !alive(p)), 60_000);
  });

  test('the controller SIGKILLed while queueing, then a partial merge left behind: the same command resumes with one log, nothing lost, nothing twice', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-resume-enqueue');
    const fast = join(dirs.work, 'fast.jsonl');
    writeFileSync(
      fast,
      '{"function": "text_editor", "arguments": {"command": "create", "path": "/app/greeting.txt", "file_text": "hello, notes\\n"}}\n' +
        '{"function": "submit", "arguments": {"answer": "done"}}\n',
    );
    const epochs = 30;
    const args = ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', fast, '--epochs', String(epochs), '--max-samples', '3', '--log-dir', logDir, '--yes'];
    const child = startCt(args, { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    started.push(child.pid!);
    const done = finished(child);
    const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
    const fleetDir = join(logDir, 'fleet', /fleet ([0-9a-f]{16})/.exec(head)![1]!);
    const events = () => readEvents(readIf(join(fleetDir, 'events.jsonl')));
    // The manifest is stored ('start'); queues and jobs come next: kill it there.
    const deadline = Date.now() + 60_000;
    while (!events().some((e) => e.event === 'start') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    child.kill('SIGKILL');
    await done;
    assert.ok(events().some((e) => e.event === 'start'), 'the controller stored its manifest');
    assert.ok(!events().some((e) => e.event === 'enqueue'), 'killed before every job was queued');
    // A controller killed while merging leaves its partial log in the fleet folder, never in the log dir.
    writeFileSync(join(fleetDir, 'merging.eval'), 'a merge cut short');
    const r = await runCt(args, { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 240_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /resuming fleet [0-9a-f]{16}: 0 of 30 job\(s\) already finished/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(
      log!.samples.map((s) => s.epoch).sort((a, b) => a - b),
      Array.from({ length: epochs }, (_, i) => i + 1),
    );
    for (const s of log!.samples) assert.deepEqual(s.scores.linux_scorer, { main_task_success: 'C' }, `epoch ${s.epoch}`);
    assert.equal(existsSync(join(fleetDir, 'merging.eval')), false, 'no partial merge left behind');
  });

  test('no progress: a warning, then the fleet is stopped with results kept and the command that resumes it; an unreadable message is never run', async () => {
    await moto.reset();
    const logDir = testLogDir('fleet-stale');
    const args = ['run', 'eval', '--fleet', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', slow, '--log-dir', logDir, '--yes'];
    const r = await runCt([...args, '--workers', 'external'], {
      cwd: dirs.work,
      env: fleetEnv(moto, dirs, { CT_FLEET_STALE_WARNING_MINUTES: '0.04', CT_FLEET_STALE_TEARDOWN_MINUTES: '0.15' }),
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 1, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /start workers on your machines with:\n  ct fleet worker --fleet [0-9a-f]{16} --region us-east-1/);
    assert.match(r.stderr, /warning: no job finished for [\d.]+ min \(1 left\)/);
    assert.match(r.stderr, /the fleet was stopped; results are kept/);
    assert.match(r.stderr, /Resume with:\n  ct run eval --fleet -e notes_app/);

    // The kept fleet: a message of another protocol version joins its queue, then workers resume it.
    const sqs = new SQSClient({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });
    const fleetId = /--fleet ([0-9a-f]{16})/.exec(r.stderr)![1]!;
    const url = (await sqs.send(new GetQueueUrlCommand({ QueueName: `lb-fleet-${fleetId}-work` }))).QueueUrl!;
    await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify({ version: 99, fleet_id: fleetId, job: { job_id: 'from-the-future' } }) }));
    sqs.destroy();
    const resumed = await runCt([...args, '--workers', 'local:1'], { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 120_000 });
    assert.equal(resumed.code, 0, `${resumed.stdout}\n${resumed.stderr}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.deepEqual(log!.samples.map((s) => s.id), ['notes_app:create_greeting']);
    const worker = readFileSync(join(logDir, 'fleet', fleetId, 'worker-1.log'), 'utf8');
    assert.match(worker, /not run \(receive 1\): .*protocol version 99.*moved to the dead-letter queue/);
    assert.doesNotMatch(worker, /from-the-future started/);
    const events = readEvents(readFileSync(join(logDir, 'fleet', fleetId, 'events.jsonl'), 'utf8'));
    assert.ok(events.some((e) => e.event === 'rejected_message'), 'dead-lettered and reported');
  });
});

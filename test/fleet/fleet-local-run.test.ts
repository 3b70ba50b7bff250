import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { onlyLog, runCt } from '../helpers/cli.js';
import { FAKE_AWS, ctProjects, fleetEnv, fleetWorkDir, motoContents, readEvents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { runPython } from '../helpers/python.js';
import { defaultMaxSamples } from '../../src/eval/capacity.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');

/** The log's run times as inspect_ai reads them. */
async function runTimes(path: string): Promise<{ started_at: string; completed_at: string }> {
  const script = 'import json, sys\nfrom inspect_ai.log import read_eval_log\nl = read_eval_log(json.load(sys.stdin), header_only=True)\nprint(json.dumps({"started_at": l.stats.started_at, "completed_at": l.stats.completed_at}))\n';
  return (await runPython(script, path)) as { started_at: string; completed_at: string };
}
/** 2 samples x 10 epochs = 20 jobs of the example notes_app environment, replayed. */
const RUN = ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '10', '--max-samples', '2'];

describe('ct run eval --fleet --workers local:2 against moto and Docker', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let logDir: string;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('local-run');
    logDir = testLogDir('fleet-local');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('20 jobs on 2 local workers: one merged log, one sample per job, queues deleted, results kept', async () => {
    const r = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 240_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /20 job\(s\) enqueued, 2 worker\(s\) launched/);
    assert.match(r.stdout, /success: 20 sample\(s\); main task 10\/20 \(50%\)/);
    assert.match(r.stderr, /\[20\/20\] done 20, failed 0, in flight 0, workers \d, elapsed \d+:\d\d, cost \$0\.00/, 'periodic lines when not a TTY; nothing in flight at the end');
    // Named as Inspect names a log, like a local run's: `{created}_{task}_{task id}.eval`, whole seconds.
    assert.match(basename(onlyLog(logDir)), /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-00-00_[^_]+_[2-9A-HJ-NP-Za-km-z]{22}\.eval$/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.status, 'success');
    const keys = log!.samples.map((s) => `${s.id}#${s.epoch}`);
    assert.equal(keys.length, 20);
    assert.equal(new Set(keys).size, 20, 'exactly one sample per job');
    for (const s of log!.samples) {
      const want = s.id === 'notes_app:create_greeting' ? 'C' : 'I';
      assert.deepEqual(s.scores.linux_scorer, { main_task_success: want }, `${s.id} epoch ${s.epoch}`);
    }
    const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stdout)![1]!;
    const fleetDir = join(logDir, 'fleet', fleetId);
    const events = readEvents(readFileSync(join(fleetDir, 'events.jsonl'), 'utf8'));
    assert.equal(events.filter((e) => e.event === 'job_done').length, 20);
    for (const kind of ['start', 'enqueue', 'launch', 'merge', 'teardown']) assert.ok(events.some((e) => e.event === kind), kind);
    assert.deepEqual(readdirSync(fleetDir).filter((f) => f.startsWith('worker-')).sort(), ['worker-1.log', 'worker-2.log']);
    const workerLogs = ['worker-1.log', 'worker-2.log'].map((f) => readFileSync(join(fleetDir, f), 'utf8'));
    assert.ok(workerLogs.every((t) => /job \S+ ok in/.test(t)), 'both workers ran jobs');
    const held = await motoContents(moto);
    assert.deepEqual(held.queues, [], 'the controller deleted the queues it created');
    assert.equal(held.objects.filter((o) => o.endsWith('.eval')).length, 20, 'results stay in S3');
    assert.ok(held.objects.includes(`lb-fleet-results-migrated/${fleetId}/manifest.json`));
    assert.deepEqual(ctProjects('create-greeting').concat(ctProjects('fix-config')), [], 'no sandbox left');
  });

  test('the same command again resumes with nothing left to do: enqueues 0, launches 0, same one log, same run times', async () => {
    const before = readdirSync(logDir).filter((f) => f.endsWith('.eval'));
    const timesBefore = await runTimes(onlyLog(logDir));
    const r = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 120_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /20 job\(s\), 20 already finished, 0 to run/);
    assert.match(r.stdout, /0 job\(s\) enqueued, 0 worker\(s\) launched/);
    assert.deepEqual(readdirSync(logDir).filter((f) => f.endsWith('.eval')), before, 'the merged log is replaced, not added');
    const timesAfter = await runTimes(onlyLog(logDir));
    assert.deepEqual(timesAfter, timesBefore, "the run's start and end are its samples', not the resume's");
    assert.ok(Date.parse(timesAfter.completed_at) - Date.parse(timesAfter.started_at) > 1000, JSON.stringify(timesAfter));
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.samples.length, 20);
  });

  test('local workers share the machine: without --max-samples each takes its share of what one local run would', async () => {
    await moto.reset();
    const noMax = RUN.slice(0, RUN.indexOf('--max-samples'));
    const r = await runCt([...noMax, '--log-dir', logDir, '--estimate'], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    assert.equal(r.code, 0, r.stderr);
    const share = Math.ceil(defaultMaxSamples() / 2);
    assert.match(r.stderr, new RegExp(`workers: 2 \\(local processes on this machine\\), ${share} sample\\(s\\) at once each`));
  });

  test('--estimate prints jobs, workers, time and cost and creates nothing', async () => {
    await moto.reset();
    const r = await runCt([...RUN, '--epochs', '3', '--log-dir', logDir, '--estimate'], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /6 job\(s\), 0 already finished, 6 to run/);
    assert.match(r.stderr, /workers: 2 \(local processes on this machine\), 2 sample\(s\) at once each/);
    assert.match(r.stderr, /estimated time: ~\d+ min; estimated cost: \$0\.00/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] });
  });

  test('on a terminal, answering n at the prompt starts nothing: exit 1, nothing created', async () => {
    await moto.reset();
    const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
    const cmd = [process.execPath, join(REPO_ROOT, 'bin', 'ct.js'), ...RUN, '--log-dir', logDir].map(quote).join(' ');
    // `script` gives the command a pseudo-terminal and types the answer into it.
    const r = spawnSync('script', ['-qec', cmd, '/dev/null'], { cwd: dirs.work, env: fleetEnv(moto, dirs), input: 'n\n', encoding: 'utf8', timeout: 120_000 });
    assert.match(r.stdout, /Proceed\? \[y\/N\]/, r.stdout);
    assert.match(r.stdout, /not started: nothing was created/);
    assert.equal(r.status, 1, r.stdout);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] });
  });

  test('without a terminal and without --yes it refuses (exit 2) and creates nothing', async () => {
    const r = await runCt([...RUN, '--log-dir', logDir], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /pass --yes/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] });
  });

  test('bad input exits 2 with a clear message and creates nothing in AWS', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['--ec2', '--ec2-instance-type', 'c7i.nonesuch'], /unknown instance type c7i\.nonesuch/],
      [['--ec2', '--spot', '--on-demand'], /--spot and --on-demand exclude each other/],
      [['--on-demand'], /--spot, --on-demand, --concurrency and --price apply to EC2 workers/],
      [['--workers', 'local:0'], /--workers local:0: expected local:N/],
      [['--workers', 'remote'], /expected local:N .*external, or ec2/],
      [['--extra-src', join(dirs.work, 'nope')], /--extra-src .*nope: no such folder/],
      [['--extra-src', join(dirs.work, 'a', 'tools'), '--extra-src', join(dirs.work, 'b', 'tools')], /have the same basename "tools"/],
      [['--extra-src', join(dirs.work, 'a', 'tools'), '--worker-setup', 'tools/../../setup.sh'], /--worker-setup/],
      [['--worker-setup', 'tools/setup.sh'], /--worker-setup tools\/setup.sh must be <basename>\/<path> inside an --extra-src tree/],
      [['-e', 'demo:kv_service'], /mix the setting:env and bare forms/],
    ];
    mkdirSync(join(dirs.work, 'a', 'tools'), { recursive: true });
    mkdirSync(join(dirs.work, 'b', 'tools'), { recursive: true });
    writeFileSync(join(dirs.work, 'setup.sh'), 'true\n');
    for (const [extra, message] of cases) {
      const args = [...RUN, '--log-dir', logDir, '--yes'];
      const i = args.indexOf('--workers');
      if (extra[0] === '--workers' || extra[0] === '--ec2') args.splice(i, 2);
      const r = await runCt([...args, ...extra], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
      assert.equal(r.code, 2, `${extra.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, extra.join(' '));
    }
    const both = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: { ...fleetEnv(moto, dirs), AWS_PROFILE: 'fleet' } });
    assert.equal(both.code, 2, both.stderr);
    assert.match(both.stderr, /both AWS_PROFILE \(fleet\) and AWS_ACCESS_KEY_ID are set/);
    writeFileSync(join(dirs.work, 'policy.mjs'), 'export const other = { name: "other", async run() { return {}; } };\n');
    const noExport = await runCt([...RUN.filter((a, i) => !(RUN[i - 1] === '--trajectory' || a === '--trajectory')).map((a) => (a === 'replay' ? 'policy.mjs:nope' : a)), '--log-dir', logDir, '--yes'], {
      cwd: dirs.work,
      env: fleetEnv(moto, dirs),
    });
    assert.equal(noExport.code, 2, noExport.stderr);
    assert.match(noExport.stderr, /nope/);
    assert.doesNotMatch(noExport.stderr, /at .*\.js:\d+/, 'a message, not a stack trace');
    const local = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--max-workers', '3'], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    assert.equal(local.code, 2);
    assert.match(local.stderr, /--max-workers only apply to fleet runs; add --fleet/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] });
  });

  test('a fleet whose manifest another protocol version wrote is refused (exit 2) before any queue is created', async () => {
    await moto.reset();
    const est = await runCt([...RUN, '--log-dir', logDir, '--estimate'], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    const fleetId = /fleet ([0-9a-f]{16}):/.exec(est.stderr)![1]!;
    const s3 = new S3Client({ region: 'us-east-1', endpoint: moto.url, forcePathStyle: true, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });
    await s3.send(new CreateBucketCommand({ Bucket: 'lb-fleet-results-migrated' }));
    await s3.send(new PutObjectCommand({ Bucket: 'lb-fleet-results-migrated', Key: `${fleetId}/manifest.json`, Body: JSON.stringify({ version: 99, fleet_id: fleetId }) }));
    s3.destroy();
    const r = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: fleetEnv(moto, dirs) });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /fleet protocol version 99, but this ct speaks version 2/);
    assert.deepEqual((await motoContents(moto)).queues, []);
  });
});

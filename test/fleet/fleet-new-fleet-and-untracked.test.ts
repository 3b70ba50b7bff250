/**
 * Two controller behaviours a user sees on the command line (moto, Docker, the real CLI):
 * - ct run from a checkout with an untracked file warns, naming the file, that it will not
 *   reach the workers;
 * - `--new-fleet` runs every job again instead of resuming the finished fleet; and a `local:`
 *   fleet never touches SSM (its workers inherit the controller's environment).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { onlyLog, runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents, readEvents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { git } from '../settings/helpers/git-fixtures.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
/** 1 sample x 2 epochs = 2 jobs, replayed. */
const RUN = ['run', 'eval', '--fleet', '--workers', 'local:1', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '2'];

describe('fleet controller: untracked-file warning, --new-fleet, no SSM for local workers', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let logDir: string;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('new-fleet');
    logDir = testLogDir('fleet-new-fleet');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('run from a checkout with an untracked file, the controller warns and names it', async () => {
    // A ct checkout of its own (the built package committed), then one file left untracked.
    const ct = join(dirs.work, 'ct-checkout');
    mkdirSync(join(ct, 'dist'), { recursive: true });
    cpSync(join(REPO_ROOT, 'bin'), join(ct, 'bin'), { recursive: true });
    cpSync(join(REPO_ROOT, 'dist', 'src'), join(ct, 'dist', 'src'), { recursive: true });
    cpSync(join(REPO_ROOT, 'package.json'), join(ct, 'package.json'));
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(ct, 'node_modules'));
    writeFileSync(join(ct, '.gitignore'), 'node_modules\n');
    git(ct, 'init', '-q', '-b', 'main');
    git(ct, 'add', '-A');
    git(ct, 'commit', '-q', '-m', 'ct');
    writeFileSync(join(ct, 'my-new-policy.ts'), 'export const p = 1;\n');

    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      let stderr = '';
      const child = spawn(process.execPath, [join(ct, 'bin', 'ct.js'), ...RUN, '--log-dir', logDir, '--estimate'], { cwd: dirs.work, env: fleetEnv(moto, dirs), stdio: ['ignore', 'ignore', 'pipe'] });
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /warning: 1 untracked file\(s\) will not reach the workers \(brand-new untracked files require git add to ship\): my-new-policy\.ts\n/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] }, '--estimate creates nothing');
  });

  test('--new-fleet runs every job again instead of resuming; a local fleet never calls SSM', async () => {
    await moto.reset();
    // Nothing listens there: a local fleet must not need SSM.
    const env = fleetEnv(moto, dirs, { AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:9', ANTHROPIC_API_KEY: 'sk-ant-local-only' });
    const first = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env, timeoutMs: 180_000 });
    assert.equal(first.code, 0, `${first.stdout}\n${first.stderr}`);
    assert.match(first.stdout, /2 job\(s\) enqueued, 1 worker\(s\) launched/);
    assert.doesNotMatch(first.stderr, /secrets:/, 'local workers inherit the environment: no SSM parameters');
    const fleetId = /fleet ([0-9a-f]{16})/.exec(first.stdout)![1]!;
    const firstResults = (await motoContents(moto)).objects.filter((o) => o.endsWith('.eval'));
    assert.equal(firstResults.length, 2);

    const logDir2 = testLogDir('fleet-new-fleet-again');
    const again = await runCt([...RUN, '--log-dir', logDir2, '--yes', '--new-fleet'], { cwd: dirs.work, env, timeoutMs: 180_000 });
    assert.equal(again.code, 0, `${again.stdout}\n${again.stderr}`);
    assert.match(again.stderr, /2 job\(s\), 0 already finished, 2 to run/, 'the estimate counts nothing as finished');
    assert.doesNotMatch(again.stderr, /resuming fleet/);
    assert.match(again.stdout, new RegExp(`fleet ${fleetId}: 2 job\\(s\\) enqueued, 1 worker\\(s\\) launched`), 'every job runs again');
    const events = readEvents(readFileSync(join(logDir2, 'fleet', fleetId, 'events.jsonl'), 'utf8'));
    assert.deepEqual(events.filter((e) => e.event === 'start' || e.event === 'resume').map((e) => e.event), ['start'], 'a fresh start, not a resume');
    assert.equal(events.filter((e) => e.event === 'job_done').length, 2, 'both jobs ran again');
    assert.ok(!events.some((e) => e.event === 'secrets_stored'));
    const held = await motoContents(moto);
    assert.equal(held.objects.filter((o) => o.endsWith('.eval')).length, 2, 'one result per job: the earlier ones were replaced');
    const [log] = await readWithInspect([onlyLog(logDir2)]);
    assert.equal(log!.samples.length, 2);

    // Once more into the first log dir: the prompt says what goes, and the earlier merged log goes with it.
    const before = readdirSync(logDir).filter((f) => f.endsWith('.eval'));
    assert.equal(before.length, 1);
    const third = await runCt([...RUN, '--log-dir', logDir, '--yes', '--new-fleet'], { cwd: dirs.work, env, timeoutMs: 180_000 });
    assert.equal(third.code, 0, `${third.stdout}\n${third.stderr}`);
    assert.match(third.stderr, new RegExp(`--new-fleet drops the 2 result\\(s\\) fleet ${fleetId} already has`));
    const after = readdirSync(logDir).filter((f) => f.endsWith('.eval'));
    assert.equal(after.length, 1, `the log dir holds the fleet once: ${after.join(', ')}`);
  });
});


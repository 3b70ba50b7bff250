/**
 * `dockerd` restarted under a worker mid-sample: a fleet of two local workers (moto, real Docker,
 * inspect_ai) loses the Docker Engine while samples run in it — the engine stops every container
 * on its way down — and gets it back 10 s later. The samples caught in it fail as
 * attempts and run again; every result is in the merged log exactly once, exit 0, nothing left in
 * SQS or Docker.
 *
 * It restarts this machine's Docker Engine (stopped with SIGTERM, started again with the command
 * line it ran with), which every other user of that engine would feel, so it runs only when
 * CT_TEST_RESTART_DOCKERD=1 (the CI script sets it: the suite runs one file at a time there).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { tmpdir } from 'node:os';
import { SandboxUnavailableError } from '../../src/errors.js';
import { LocalRunner } from '../../src/host/local-runner.js';
import { processAlive } from '../../src/host/process-alive.js';
import { DockerProvider } from '../../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../../src/sandbox/run-registry.js';
import { finished, onlyLog, startCt, waitForOutput } from '../helpers/cli.js';
import { ctProjects, fleetEnv, fleetWorkDir, motoContents, readEvents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { FIXTURES, REPO_ROOT } from '../helpers/paths.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const ENABLED = process.env.CT_TEST_RESTART_DOCKERD === '1';
const JOBS = 8;
/** How long the engine stays stopped before it starts again (a restart in CI took 13 s in all). */
const DOWN_MS = 10_000;

function dockerAnswers(): boolean {
  try {
    execFileSync('docker', ['info', '--format', '{{.ServerVersion}}'], { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

function removeProjectContainers(project: string): void {
  const filter = ['--filter', `label=com.docker.compose.project=${project}`];
  const ids = execFileSync('docker', ['ps', '-aq', ...filter], { encoding: 'utf8' }).split('\n').filter(Boolean);
  if (ids.length) execFileSync('docker', ['rm', '-f', ...ids], { stdio: 'ignore' });
  const nets = execFileSync('docker', ['network', 'ls', '-q', ...filter], { encoding: 'utf8' }).split('\n').filter(Boolean);
  if (nets.length) execFileSync('docker', ['network', 'rm', ...nets], { stdio: 'ignore' });
}

/** Stops the running dockerd (SIGTERM: it stops its containers) and starts it again the same way. */
async function restartDockerd(holdDownMs = 0): Promise<{ downSeconds: number }> {
  const pid = Number(execFileSync('pgrep', ['-o', '-x', 'dockerd'], { encoding: 'utf8' }).trim());
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  const down = Date.now();
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 600 && processAlive(pid); i++) await sleep(100);
  assert.ok(!processAlive(pid), 'dockerd stopped within 60 s');
  await sleep(holdDownMs);
  const log = openSync('/var/log/dockerd.log', 'a');
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', log, log] });
  child.unref();
  for (let i = 0; i < 120 && !dockerAnswers(); i++) await sleep(500);
  assert.ok(dockerAnswers(), 'dockerd answers again within 60 s (see /var/log/dockerd.log)');
  return { downSeconds: (Date.now() - down) / 1000 };
}

describe('dockerd restarted under a worker mid-sample', { skip: ENABLED ? false : 'restarts the Docker Engine: set CT_TEST_RESTART_DOCKERD=1' }, () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('dockerd');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
    // Whatever happened, the engine is left answering for the tests after this one, with no
    // sandbox of this test in it (a failure here is reported once, not again by every later
    // test that checks it left nothing).
    if (!dockerAnswers()) await restartDockerd().catch(() => undefined);
    for (const project of ctProjects('create-greeting')) removeProjectContainers(project);
  });

  test(`${JOBS} jobs on 2 local workers, dockerd restarted while samples run: every result exactly once, exit 0, nothing left`, { timeout: 420_000 }, async () => {
    const logDir = testLogDir('fleet-dockerd');
    const started = Date.now();
    const child = startCt(
      ['run', 'eval', '--fleet', '--workers', 'local:2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', String(JOBS), '--max-samples', '2', '--log-dir', logDir, '--yes'],
      { cwd: dirs.work, env: fleetEnv(moto, dirs) },
    );
    const done = finished(child);
    const head = await waitForOutput(child, (t) => /fleet [0-9a-f]{16}: \d+ job/.test(t));
    const fleetId = /fleet ([0-9a-f]{16})/.exec(head)![1]!;
    const fleetDir = join(logDir, 'fleet', fleetId);
    const workerLogs = () =>
      existsSync(fleetDir)
        ? readdirSync(fleetDir)
            .filter((n) => n.startsWith('worker-'))
            .map((n) => readFileSync(join(fleetDir, n), 'utf8'))
            .join('\n')
        : '';
    // Mid-sample: a job has started and its sandbox's containers are up.
    const running = () => {
      try {
        return ctProjects('create-greeting').length > 0 && /job \S+ started/.test(workerLogs()) && execFileSync('docker', ['ps', '--filter', 'status=running', '--filter', 'label=com.docker.compose.project', '--format', '{{.Label "com.docker.compose.project"}}'], { encoding: 'utf8' }).includes('create_greeting');
      } catch {
        return false;
      }
    };
    for (let i = 0; i < 1200 && !running() && child.exitCode === null; i++) await sleep(100);
    assert.ok(running(), 'a sample runs in its sandbox');
    const { downSeconds } = await restartDockerd(DOWN_MS);
    const r = await done;
    const wall = (Date.now() - started) / 1000;
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}\n${workerLogs().slice(-6000)}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    const keys = log!.samples.map((s) => `${s.id}#${s.epoch}`);
    const lost = JOBS - new Set(keys).size;
    const duplicated = keys.length - new Set(keys).size;
    const events = readEvents(readFileSync(join(fleetDir, 'events.jsonl'), 'utf8'));
    const failedAttempts = events.filter((e) => e.event === 'job_failed').length;
    console.log(`dockerd restarted mid-sample (down ${downSeconds.toFixed(1)} s): ${failedAttempts} attempt(s) failed and ran again; ${lost} lost, ${duplicated} duplicated; wall ${wall.toFixed(0)} s`);
    assert.equal(lost, 0, 'no result lost');
    assert.equal(duplicated, 0, 'no result twice');
    assert.deepEqual(log!.samples.filter((s) => s.error).map((s) => `${s.id}#${s.epoch}: ${s.error}`), [], 'every sample scored in the end');
    assert.deepEqual((await motoContents(moto)).queues, [], 'no queue left');
    for (let i = 0; i < 100 && ctProjects('create-greeting').length; i++) await sleep(200);
    assert.deepEqual(ctProjects('create-greeting'), [], 'no sandbox left');
  });
});

describe('dockerd restarted while ct runs a command apart from the agent (a scorer, the interpreters\' hashes)', { skip: ENABLED ? false : 'restarts the Docker Engine: set CT_TEST_RESTART_DOCKERD=1' }, () => {
  test('the exec the engine lost fails as infrastructure (the attempt runs again), never as exit 137 from the command', { timeout: 180_000 }, async () => {
    const runId = newRunId();
    const registry = new RunRegistry(join(tmpdir(), 'ct-test-state'));
    registry.register(runId);
    const provider = new DockerProvider({ runner: new LocalRunner(), runId, registry, compose: 'auto', execChannel: true });
    const env = { name: 'conformance-busybox', composeFile: join(FIXTURES, 'conformance-busybox', 'compose.yml') };
    await provider.taskInit(env);
    const sandboxes = await provider.sampleInit(env, { label: 'lost-exec' });
    try {
      const sandbox = sandboxes.get('default')!;
      const running = sandbox.apart!.execFresh(['sleep', '120'], { timeoutMs: 150_000 });
      const outcome = running.then(
        (r) => ({ resolved: r }),
        (e: unknown) => ({ rejected: e }),
      );
      for (let i = 0; i < 100 && !execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).includes('sleep 120'); i++) await sleep(100);
      await restartDockerd();
      const o = await outcome;
      assert.ok('rejected' in o, `the exec was lost with dockerd, yet it resolved: ${JSON.stringify('resolved' in o ? o.resolved : undefined)}`);
      assert.ok(o.rejected instanceof SandboxUnavailableError, String(o.rejected));
      assert.match((o.rejected as Error).message, /sandbox default is gone|the Docker Engine lost an exec in default/);
    } finally {
      await provider.sampleCleanup(sandboxes).catch(() => undefined);
      await provider.taskCleanup().catch(() => undefined);
    }
  });
});

/**
 * How many workers a fleet may have: `--workers local:N` above the run's limit (--max-workers,
 * fleet.max_workers) or above a few processes per CPU of this machine is refused with exit 2,
 * naming the limit and what raises it, before anything is created; never silently cut down.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { availableCpus } from '../../src/eval/capacity.js';
import { LOCAL_WORKERS_PER_CPU, fleetWorkerCount } from '../../src/fleet/launcher.js';
import { runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';

const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const RUN = ['run', 'eval', '--fleet', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', '4'];

describe('fleet worker limits (ct run eval --fleet --workers local:N, --max-workers)', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('worker-limits');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  const ct = (extra: string[], env: Record<string, string> = {}) =>
    runCt([...RUN, '--log-dir', join(dirs.work, 'logs'), ...extra], { cwd: dirs.work, env: fleetEnv(moto, dirs, env) });

  test('local:N above the limit is refused (exit 2), naming the limit and the flag, config key and variable that raise it', async () => {
    const r = await ct(['--workers', 'local:999', '--yes']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(
      r.stderr,
      /--workers local:999 asks for 999 worker processes, more than the limit of 10 \(fleet\.max_workers\); ask for fewer, or raise the limit: --max-workers 999, fleet\.max_workers in ct\.config\.yml, or CT_FLEET_MAX_WORKERS/,
    );

    const fromEnv = await ct(['--workers', 'local:4', '--yes'], { CT_FLEET_MAX_WORKERS: '3' });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(fromEnv.stderr, /local:4 asks for 4 worker processes, more than the limit of 3 \(fleet\.max_workers\)/);

    const fromFlag = await ct(['--workers', 'local:4', '--max-workers', '3', '--yes']);
    assert.equal(fromFlag.code, 2, fromFlag.stderr);
    assert.match(fromFlag.stderr, /local:4 asks for 4 worker processes, more than --max-workers 3; ask for fewer, or raise --max-workers to 4/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] }, 'nothing created');
  });

  test('--max-workers far above this machine is not enough: more local processes than 4 per CPU are refused (exit 2)', async () => {
    const r = await ct(['--workers', 'local:999', '--max-workers', '1000', '--yes']);
    assert.equal(r.code, 2, r.stderr);
    const cpus = availableCpus();
    const bound = Math.max(1, Math.floor(cpus * LOCAL_WORKERS_PER_CPU));
    assert.ok(
      r.stderr.includes(`--workers local:999 asks for 999 worker processes on this machine, which has ${cpus} CPU(s): at most ${bound} local workers (4 per CPU)`),
      r.stderr,
    );
    assert.match(r.stderr, /raise that for more at once here, or run workers on other machines \(--workers external, or --ec2\)/);
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] }, 'nothing created');
  });

  test('a count within both limits runs as asked, whatever --max-workers allows; --help states the rule', async () => {
    const r = await ct(['--workers', 'local:2', '--max-workers', '1000', '--estimate']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /workers: 2 \(local processes on this machine\)/);

    const help = await runCt(['run', 'eval', '--help']);
    assert.equal(help.code, 0, help.stderr);
    const text = help.stdout.replace(/\s+/g, ' ');
    assert.match(text, /--workers local:N starts exactly N worker processes here\. N above --max-workers \(fleet\.max_workers, CT_FLEET_MAX_WORKERS\) or above 4 per CPU of this machine is refused \(exit 2\), never cut down/);
  });

  test('the rule at its edges: N equal to either limit runs; one more is refused; external and EC2 get the limit', () => {
    assert.equal(fleetWorkerCount({ kind: 'local', count: 8 }, { maxWorkers: 8, fromFlag: false, cpus: 2 }), 8);
    assert.throws(() => fleetWorkerCount({ kind: 'local', count: 9 }, { maxWorkers: 8, fromFlag: false, cpus: 2 }), ConfigError);
    assert.throws(() => fleetWorkerCount({ kind: 'local', count: 9 }, { maxWorkers: 100, fromFlag: true, cpus: 2 }), /at most 8 local workers/);
    assert.equal(fleetWorkerCount({ kind: 'local', count: 1 }, { maxWorkers: 10, fromFlag: false, cpus: 0.25 }), 1);
    assert.equal(fleetWorkerCount({ kind: 'ec2' }, { maxWorkers: 50, fromFlag: true, cpus: 1 }), 50);
    assert.equal(fleetWorkerCount({ kind: 'external' }, { maxWorkers: 10, fromFlag: false, cpus: 1 }), 10);
  });
});

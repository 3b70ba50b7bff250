/**
 * One rule for a log's final status, whatever placement ran the samples: a run with a sample
 * error logs `success` under `--no-fail-on-error` and `error` without it, with the rule in
 * `eval.config.fail_on_error`, locally and on a fleet (a local worker, moto, Docker), as
 * inspect_ai reads the logs. `--no-fail-on-error` does not split a fleet: the same command
 * without it resumes the finished fleet and only merges again.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ctEnv, onlyLog, runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir } from '../helpers/fleet.js';
import { readWithInspect, type InspectView } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';

/** Two samples: create_greeting is scored, not_ready's scorer reports the environment not ready (a sample error). */
const RUN = ['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '-t', 'not_ready', '--policy', 'test'];
const FLEET = ['--fleet', '--workers', 'local:1', '--yes'];

describe('fail_on_error decides the status of a local run and of a fleet alike', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let fleetId: string;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('fail-on-error');
    const t = join(dirs.settings, 'demo', 'notes_app', 'main_tasks', 'not_ready');
    mkdirSync(t, { recursive: true });
    writeFileSync(join(t, 'info.yml'), 'name: Not ready\ntask_category: fix_bug\nshort_description: x\nscorer_description: x\ncoverage: x\ndescription:\n  file: requirements.md\n');
    writeFileSync(join(t, 'requirements.md'), 'Nothing to do.\n');
    writeFileSync(join(t, 'scorer.sh'), 'echo "NOT_READY: the database never came up"\n');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  const localEnv = () => ctEnv({ CT_SETTINGS_DIR: dirs.settings, CT_STATE_DIR: dirs.state });

  function assertLog(log: InspectView, status: string, failOnError: boolean, where: string): void {
    assert.equal(log.status, status, where);
    assert.equal(log.header_status, status, where);
    assert.equal(log.fail_on_error, failOnError, where);
    assert.deepEqual(log.samples.map((s) => s.id).sort(), ['notes_app:create_greeting', 'notes_app:not_ready'], where);
    assert.match(log.samples.find((s) => s.id === 'notes_app:not_ready')!.error!, /not ready/, where);
  }

  test('--no-fail-on-error: a sample error leaves both logs successful, and both runs exit 0', async () => {
    const localDir = testLogDir('fail-on-error-local-no');
    const local = await runCt([...RUN, '--no-fail-on-error', '--log-dir', localDir], { cwd: dirs.work, env: localEnv() });
    assert.equal(local.code, 0, `${local.stdout}\n${local.stderr}`);
    const fleetDir = testLogDir('fail-on-error-fleet-no');
    const fleet = await runCt([...RUN, ...FLEET, '--no-fail-on-error', '--log-dir', fleetDir], { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 240_000 });
    assert.equal(fleet.code, 0, `${fleet.stdout}\n${fleet.stderr}`);
    assert.match(fleet.stdout, /2 job\(s\) enqueued, 1 worker\(s\) launched/);
    fleetId = /fleet ([0-9a-f]{16})/.exec(fleet.stdout)![1]!;
    const [l, f] = await readWithInspect([onlyLog(localDir), onlyLog(fleetDir)]);
    assertLog(l!, 'success', false, 'local');
    assertLog(f!, 'success', false, 'fleet');
  });

  test('without the flag: both logs are errors and both runs exit 1; the fleet is the same one, merged again', async () => {
    const localDir = testLogDir('fail-on-error-local-yes');
    const local = await runCt([...RUN, '--log-dir', localDir], { cwd: dirs.work, env: localEnv() });
    assert.equal(local.code, 1, `${local.stdout}\n${local.stderr}`);
    const fleetDir = testLogDir('fail-on-error-fleet-yes');
    // Kept as they are (a rerun would otherwise retry the sample that ended in error): only merged again.
    const fleet = await runCt([...RUN, ...FLEET, '--no-retry-errors', '--log-dir', fleetDir], { cwd: dirs.work, env: fleetEnv(moto, dirs), timeoutMs: 120_000 });
    assert.equal(fleet.code, 1, `${fleet.stdout}\n${fleet.stderr}`);
    assert.match(fleet.stdout, new RegExp(`fleet ${fleetId}: 0 job\\(s\\) enqueued, 0 worker\\(s\\) launched`));
    const [l, f] = await readWithInspect([onlyLog(localDir), onlyLog(fleetDir)]);
    assertLog(l!, 'error', true, 'local');
    assertLog(f!, 'error', true, 'fleet');
  });
});

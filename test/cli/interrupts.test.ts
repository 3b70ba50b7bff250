import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, ctEnv, onlyLog, runCt, startCt } from '../helpers/cli.js';
import { leftoversOfRun, runsOfState, waitForProjects } from '../helpers/ct-projects.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';

/** Seconds a stopped run may take to exit: teardown of one sample project (measured ~1-2 s). */
const STOP_WITHIN_S = 10;

/** A main task of notes_app with the given setup and scorer scripts. */
function addTask(settings: string, env: string, id: string, scripts: { setup?: string; scorer: string }): void {
  const t = join(settings, 'demo', env, 'main_tasks', id);
  mkdirSync(t, { recursive: true });
  writeFileSync(
    join(t, 'info.yml'),
    `name: ${id}\ntask_category: fix_bug\nshort_description: x\nscorer_description: x\ncoverage: x\ndescription:\n  file: requirements.md\n`,
  );
  writeFileSync(join(t, 'requirements.md'), 'Nothing to do.\n');
  writeFileSync(join(t, 'scorer.sh'), scripts.scorer);
  if (scripts.setup) writeFileSync(join(t, 'setup.sh'), scripts.setup);
}

function exited(child: ChildProcess): Promise<{ code: number | null; at: number; output: string }> {
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  return new Promise((res) => child.on('close', (code) => res({ code, at: Date.now(), output })));
}

describe('stopping a run reaches every phase of its samples', () => {
  let work: string;
  let settings: string;
  let traj: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-interrupts-'));
    settings = join(work, 'settings');
    cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
    addTask(settings, 'notes_app', 'slow_setup', { setup: 'echo setting up\nsleep 31\n', scorer: 'echo CORRECT: fine\n' });
    addTask(settings, 'notes_app', 'slow_scorer', { scorer: 'sleep 32\necho CORRECT: fine\n' });
    // An environment that takes 40 s to become healthy: its samples stay in the starting phase.
    const slow = join(settings, 'demo', 'slow_start');
    cpSync(join(settings, 'demo', 'notes_app'), slow, { recursive: true });
    writeFileSync(
      join(slow, 'codebase', 'compose.yml'),
      'services:\n  default:\n    image: debian:bookworm-slim\n    command: ["sh", "-c", "sleep 40; touch /tmp/ready; sleep infinity"]\n    init: true\n' +
        '    healthcheck:\n      test: ["CMD", "test", "-f", "/tmp/ready"]\n      interval: 1s\n      retries: 100\n',
    );
    traj = join(work, 'calls.jsonl');
    writeFileSync(traj, '{"function": "bash", "arguments": {"cmd": "sleep 5"}}\n'.repeat(3));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const envFor = (stateDir: string) => ctEnv({ CT_SETTINGS_DIR: settings, CT_STATE_DIR: stateDir });

  test('Ctrl-C during the setup script stops the sample at once: no tool calls, logged as cancelled', async () => {
    const stateDir = join(work, 'state-setup');
    const logDir = testLogDir('stop-in-setup');
    const child = startCt(['run', 'eval', '-e', 'notes_app', '-t', 'slow_setup', '--policy', 'replay', '--trajectory', traj, '--log-dir', logDir], {
      cwd: work,
      env: envFor(stateDir),
    });
    const done = exited(child);
    const [project] = await waitForProjects(stateDir, 1, /sleep 31/);
    const runId = runsOfState(stateDir)[0]!;
    const sent = Date.now();
    child.kill('SIGINT');
    const { code, at, output } = await done;
    assert.equal(code, 130, output);
    assert.ok(at - sent < STOP_WITHIN_S * 1000, `stopped in ${(at - sent) / 1000} s`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.status, 'cancelled');
    const s = log!.samples[0]!;
    assert.match(s.error ?? '', /^CancelledError: cancelled by the user \(while running the setup scripts\)/);
    assert.equal(s.events.filter((e) => e === 'tool').length, 0, 'the agent never ran');
    assert.deepEqual(leftoversOfRun(runId), { containers: [], networks: [], volumes: [] }, `${project} torn down`);
  });

  test('Ctrl-C while the sandbox is still starting is a cancellation, not a sandbox failure', async () => {
    const stateDir = join(work, 'state-start');
    const logDir = testLogDir('stop-in-start');
    const child = startCt(
      ['run', 'eval', '-e', 'slow_start', '-t', 'create_greeting', '--epochs', '2', '--policy', 'replay', '--trajectory', traj, '--log-dir', logDir],
      { cwd: work, env: envFor(stateDir) },
    );
    const done = exited(child);
    await waitForProjects(stateDir, 2, /sleep 40/);
    const runId = runsOfState(stateDir)[0]!;
    const sent = Date.now();
    child.kill('SIGINT');
    const { code, at, output } = await done;
    assert.equal(code, 130, output);
    assert.ok(at - sent < STOP_WITHIN_S * 1000, `stopped in ${(at - sent) / 1000} s`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.status, 'cancelled');
    assert.equal(log!.samples.length, 2);
    for (const s of log!.samples) {
      assert.match(s.error ?? '', /^CancelledError: cancelled by the user \(while starting the sandbox\)/);
      assert.equal(s.events.filter((e) => e === 'tool').length, 0);
    }
    assert.deepEqual(leftoversOfRun(runId), { containers: [], networks: [], volumes: [] });
  });

  test('SIGTERM during scoring stops the scorer at once and exits 143', async () => {
    const stateDir = join(work, 'state-score');
    const logDir = testLogDir('stop-in-scoring');
    const child = startCt(['run', 'eval', '-e', 'notes_app', '-t', 'slow_scorer', '--log-dir', logDir], { cwd: work, env: envFor(stateDir) });
    const done = exited(child);
    await waitForProjects(stateDir, 1, /sleep 32/);
    const sent = Date.now();
    child.kill('SIGTERM');
    const { code, at, output } = await done;
    assert.equal(code, 143, output);
    assert.ok(at - sent < STOP_WITHIN_S * 1000, `stopped in ${(at - sent) / 1000} s`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.status, 'cancelled');
    assert.match(log!.samples[0]!.error ?? '', /^CancelledError: cancelled by the user \(while scoring\)/);
    assert.deepEqual(log!.samples[0]!.scores, {});
  });

  test('a forced stop (Ctrl-C twice) leaves nothing that `ct sandbox cleanup` does not remove; the log stays readable', async () => {
    const stateDir = join(work, 'state-forced');
    const logDir = testLogDir('forced-stop');
    const child = startCt(
      ['run', 'eval', '-e', 'slow_start', '-t', 'create_greeting', '--epochs', '3', '--max-samples', '3', '--log-dir', logDir],
      { cwd: work, env: envFor(stateDir) },
    );
    const done = exited(child);
    await waitForProjects(stateDir, 3, /sleep 40/);
    const runId = runsOfState(stateDir)[0]!;
    child.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGINT');
    const { code, output } = await done;
    assert.equal(code, 130, output);
    assert.match(output, /Forced stop/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.ok(['cancelled', 'started'].includes(log!.status), `log reads as ${log!.status}`);

    const cleanup = await runCt(['sandbox', 'cleanup', '--json'], { cwd: work, env: envFor(stateDir) });
    assert.equal(cleanup.code, 0, cleanup.stderr);
    // Other runs on this Docker host may be kept; none of this run's projects is.
    const report = JSON.parse(cleanup.stdout) as { removed: string[]; kept: string[] };
    assert.deepEqual(report.kept.filter((p) => p.startsWith(`ct-${runId}-`)), [], cleanup.stdout);
    assert.deepEqual(leftoversOfRun(runId), { containers: [], networks: [], volumes: [] });
    assert.deepEqual(runsOfState(stateDir), [], 'the run record went with its sandboxes');
  });

  test('after a forced stop the next run sweeps what is left', async () => {
    const stateDir = join(work, 'state-forced-next');
    const logDir = testLogDir('forced-stop-next');
    const child = startCt(
      ['run', 'eval', '-e', 'slow_start', '-t', 'create_greeting', '--epochs', '3', '--max-samples', '3', '--log-dir', logDir],
      { cwd: work, env: envFor(stateDir) },
    );
    const done = exited(child);
    await waitForProjects(stateDir, 3, /sleep 40/);
    const runId = runsOfState(stateDir)[0]!;
    child.kill('SIGINT');
    // Two signals sent at once may arrive as one: the second comes once the first was handled.
    await new Promise((r) => setTimeout(r, 100));
    child.kill('SIGINT');
    const { code, output } = await done;
    assert.equal(code, 130, output);
    assert.match(output, /Forced stop/);
    const next = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--log-dir', testLogDir('after-forced')], {
      cwd: work,
      env: envFor(stateDir),
    });
    assert.equal(next.code, 0, next.stderr);
    assert.deepEqual(leftoversOfRun(runId), { containers: [], networks: [], volumes: [] });
  });
});

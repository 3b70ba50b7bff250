import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, ctEnv, onlyLog, runCt } from '../helpers/cli.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startEc2World, type Ec2World } from '../ec2/helpers/ec2-world.js';

/** A copy of the example environment notes_app under another name, with its own compose file. */
function addEnvironment(settings: string, name: string, compose: string, files: Record<string, string> = {}): void {
  const dir = join(settings, 'demo', name);
  cpSync(join(settings, 'demo', 'notes_app'), dir, { recursive: true });
  writeFileSync(join(dir, 'codebase', 'compose.yml'), compose);
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, 'codebase', f), text);
}

describe('a run that fails outside its samples says why, exits 1, and runs the other environments', () => {
  let work: string;
  let settings: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-run-failures-'));
    settings = join(work, 'settings');
    cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
    addEnvironment(settings, 'missing_context', 'services:\n  default:\n    build: ./nonexistent\n    command: ["sleep", "infinity"]\n');
    addEnvironment(settings, 'failing_step', 'services:\n  default:\n    build: .\n    command: ["sleep", "infinity"]\n', {
      Dockerfile: 'FROM debian:bookworm-slim\nRUN echo about to fail && exit 3\n',
    });
    addEnvironment(
      settings,
      'bad_port',
      'services:\n  default:\n    image: debian:bookworm-slim\n    command: ["sleep", "infinity"]\n    ports: ["99999:80"]\n',
    );
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const env = () => ctEnv({ CT_SETTINGS_DIR: settings, CT_STATE_DIR: join(work, 'state') });

  test('failed image builds fail only their environment\'s samples; the summary gives each reason and what to do', async () => {
    const logDir = testLogDir('failed-builds');
    const r = await runCt(
      ['run', 'eval', '-e', 'missing_context', '-e', 'failing_step', '-e', 'notes_app', '-t', 'create_greeting', '--epochs', '2', '--log-dir', logDir],
      { cwd: work, env: env() },
    );
    assert.equal(r.code, 1, `exit 1 (stdout: ${r.stdout}\nstderr: ${r.stderr})`);
    // The healthy environment's samples ran and were scored.
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.status, 'error');
    const healthy = log!.samples.filter((s) => s.id === 'notes_app:create_greeting');
    assert.equal(healthy.length, 2);
    for (const s of healthy) assert.deepEqual(s.scores.linux_scorer, { main_task_success: 'I' });
    // Each broken environment's samples carry the build's error, the same in each.
    const missing = log!.samples.filter((s) => s.id === 'missing_context:create_greeting');
    const failing = log!.samples.filter((s) => s.id === 'failing_step:create_greeting');
    assert.equal(missing.length, 2);
    assert.equal(failing.length, 2);
    assert.match(missing[0]!.error!, /building images for environment missing_context failed/);
    assert.match(missing[0]!.error!, /nonexistent.*not found/);
    assert.match(failing[0]!.error!, /exit code: 3/);
    assert.equal(missing[0]!.error, missing[1]!.error);
    // The console names the reason (the same text the log holds) and what to do, once per error.
    const reasonLine = missing[0]!.error!.split('\n').find((l) => /not found/.test(l))!;
    assert.ok(r.stdout.includes(reasonLine), `the log's reason "${reasonLine}" is on the console:\n${r.stdout}`);
    assert.match(r.stdout, /about to fail && exit 3/);
    assert.match(r.stdout, /Fix the environment's build context or Dockerfile and run again/);
    assert.match(r.stdout, /docker compose -f \S+missing_context\S+compose\.yml build/);
    assert.match(r.stdout, /missing_context:create_greeting \(epoch 1\), missing_context:create_greeting \(epoch 2\):/);
    assert.doesNotMatch(r.stdout, /error: 0 sample/);
  });

  test('with --json the run that failed to build reports status error, every sample, and exits 1', async () => {
    const logDir = testLogDir('failed-build-json');
    const r = await runCt(['run', 'eval', '-e', 'missing_context', '-e', 'notes_app', '-t', 'create_greeting', '--log-dir', logDir, '--json'], {
      cwd: work,
      env: env(),
    });
    assert.equal(r.code, 1, r.stderr);
    const out = JSON.parse(r.stdout.trim()) as { status: string; samples: Array<{ id: string; error?: string; scores?: Record<string, string> }> };
    assert.equal(out.status, 'error');
    assert.equal(out.samples.length, 2);
    assert.match(out.samples.find((s) => s.id === 'missing_context:create_greeting')!.error!, /nonexistent.*not found/);
    assert.equal(out.samples.find((s) => s.id === 'notes_app:create_greeting')!.scores!.main_task_success, 'I');
  });

  test('a sandbox that cannot start shows its reason in the summary, not just its first line', async () => {
    const logDir = testLogDir('bad-port');
    const r = await runCt(['run', 'eval', '-e', 'bad_port', '-t', 'create_greeting', '--log-dir', logDir], { cwd: work, env: env() });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /errors:\n {2}bad_port:create_greeting \(epoch 1\):\n {4}SandboxUnavailableError: starting environment bad_port failed:\n(.*\n)*.*invalid hostPort: 99999/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.match(log!.samples[0]!.error!, /invalid hostPort: 99999/);
  });
});

describe('an EC2 sandbox that cannot find its AMI', () => {
  let world: Ec2World;
  before(async () => {
    world = await startEc2World({ sshd: false });
  });
  after(async () => {
    await world?.stop();
  });

  test('says why and what to do on the console, exits 1, and leaves nothing behind', async () => {
    const logDir = testLogDir('no-ami');
    mkdirSync(logDir, { recursive: true });
    const r = await runCt(['run', 'eval', '--sandbox', 'ec2', '-e', 'notes_app', '-t', 'create_greeting', '--log-dir', logDir], {
      env: world.env({ CT_EC2_AMI_PARAMETER: '/ct-test/no-such-parameter' }),
    });
    assert.equal(r.code, 1, `stdout: ${r.stdout}\nstderr: ${r.stderr}`);
    assert.match(r.stdout, /cannot read the AMI id from SSM parameter \/ct-test\/no-such-parameter/);
    assert.match(r.stdout, /set ec2\.ami \(CT_EC2_AMI\) to an Ubuntu 22\.04 AMI id/);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.status, 'error');
    assert.match(log!.samples[0]!.error!, /cannot read the AMI id/);
    assert.deepEqual(await world.instances(), [], 'no instance launched');
  });
});

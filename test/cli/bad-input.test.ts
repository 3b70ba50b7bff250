import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, ctEnv, runCt } from '../helpers/cli.js';

/** Bad input: a clear message, exit code 2, nothing started and no log written. */
describe('ct run eval rejects bad input with exit code 2', () => {
  let work: string;
  let settings: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-bad-input-'));
    settings = join(work, 'settings');
    cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function expectUsageError(args: string[], message: RegExp, env: Record<string, string> = {}) {
    const r = await runCt(['run', 'eval', '--log-dir', join(work, 'logs'), ...args], {
      cwd: work,
      env: ctEnv({ CT_SETTINGS_DIR: settings, ...env }),
    });
    assert.equal(r.code, 2, `exit code (stderr: ${r.stderr})`);
    assert.match(r.stderr, message);
    assert.equal(existsSync(join(work, 'logs')), false, 'no log was started');
    return r;
  }

  test('an unknown environment lists the valid ones', async () => {
    await expectUsageError(['-e', 'nope'], /unknown environment "nope".*kv_service, notes_app/);
  });

  test('an unknown main task lists the valid ones', async () => {
    await expectUsageError(['-e', 'notes_app', '-t', 'nope'], /unknown main task "nope".*create_greeting, fix_config/);
  });

  test('an unknown side task lists the valid ones', async () => {
    await expectUsageError(['-e', 'notes_app', '-t', 'fix_config', '-s', 'nope'], /unknown side task "nope".*copy_secret/);
  });

  test('a malformed task-file line names the file and line', async () => {
    const file = join(work, 'tasks.jsonl');
    writeFileSync(file, '{"env": "notes_app", "main_task": "fix_config"}\n{"env": "notes_app" "main_task": 1}\n');
    await expectUsageError(['--task-file', file], new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: not valid JSON`));
    writeFileSync(file, '{"env": "notes_app"}\n');
    await expectUsageError(['--task-file', file], /tasks\.jsonl:1: main_task/);
  });

  test('an unknown task set lists the known ones', async () => {
    await expectUsageError(['--task-file', 'nope'], /task file "nope" not found.*known task sets: demo/);
  });

  test('a missing settings folder says how to get one', async () => {
    await expectUsageError(['-e', 'notes_app'], /settings folder .*does-not-exist does not exist; pull a setting/, {
      CT_SETTINGS_DIR: join(work, 'does-not-exist'),
    });
  });

  test('an info.yml missing a required field names the file and field', async () => {
    const info = join(settings, 'demo', 'notes_app', 'main_tasks', 'create_greeting', 'info.yml');
    const orig = readFileSync(info, 'utf8');
    writeFileSync(info, orig.replace(/^task_category:.*\n/m, ''));
    try {
      await expectUsageError(['-e', 'notes_app'], /create_greeting\/info\.yml: missing required field "task_category"/);
    } finally {
      writeFileSync(info, orig);
    }
  });

  test('a compose file without a default service is refused', async () => {
    const compose = join(settings, 'demo', 'notes_app', 'codebase', 'compose.yml');
    const orig = readFileSync(compose, 'utf8');
    writeFileSync(compose, orig.replace('  default:', '  app:'));
    try {
      await expectUsageError(['-e', 'notes_app'], /has no service named "default" \(found: app\)/);
    } finally {
      writeFileSync(compose, orig);
    }
  });

  test('an unknown flag is a usage error', async () => {
    await expectUsageError(['-e', 'notes_app', '--frobnicate'], /unknown option '--frobnicate'/);
  });

  test('a malformed flag value is a usage error', async () => {
    await expectUsageError(['-e', 'notes_app', '--epochs', 'zero'], /--epochs.*whole number/);
  });

  test('epoch counts are decimal digits: 0x2, 1e0, 2.0 and -1 are refused', async () => {
    for (const bad of ['0x2', '1e0', '2.0', '-1', '0']) {
      await expectUsageError(['-e', 'notes_app', '--epochs', bad], /--epochs.*whole number of at least 1, in decimal digits/);
    }
  });

  test('an epoch count past what one run holds is refused at once, before anything starts', async () => {
    const started = Date.now();
    await expectUsageError(['-e', 'notes_app', '-t', 'create_greeting', '--epochs', '1000000000000'], /1 sample\(s\) x --epochs 1000000000000 = 1000000000000 sample runs; one run holds at most 100000\. Lower --epochs/);
    await expectUsageError(['-e', 'notes_app', '--limit', '1', '--epochs', '100001'], /one run holds at most 100000/);
    assert.ok(Date.now() - started < 30_000, 'refused without generating the work');
  });

  test('an unknown policy lists the built-in ones', async () => {
    await expectUsageError(['-e', 'notes_app', '--policy', 'nope'], /unknown policy "nope".*test/);
  });

  test('a malformed replay trajectory names the file and line', async () => {
    const file = join(work, 'calls.jsonl');
    writeFileSync(file, '{"function": "bash", "arguments": {"cmd": "ls"}}\n{"function": "rm", "arguments": {}}\n');
    await expectUsageError(['-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '--trajectory', file], /calls\.jsonl:2: function/);
  });

  test('Docker not running says how to start it', async () => {
    await expectUsageError(['-e', 'notes_app', '-t', 'fix_config'], /Docker is not running.*Start the Docker Engine/s, {
      DOCKER_HOST: `unix://${join(work, 'no-docker.sock')}`,
    });
  });
});

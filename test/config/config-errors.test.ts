/**
 * Config mistakes a user makes (typos in ct.config.yml, a list as the file, values that do not
 * parse in the environment or .env, bad log or state dirs) stop ct with exit 2 and a message
 * naming the key, variable, file or path, before anything starts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, ctEnv, runCt, type CtResult } from '../helpers/cli.js';

describe('config errors exit 2 and name what is wrong', () => {
  let work: string;
  let settings: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-config-errors-'));
    settings = join(work, 'settings');
    cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
  });
  after(() => {
    spawnSync('chattr', ['-R', '-i', work]);
    rmSync(work, { recursive: true, force: true });
  });

  /** A fresh project folder holding `files`; runs `ct ARGS` there. */
  async function ctIn(files: Record<string, string>, args: string[], env: Record<string, string> = {}): Promise<CtResult & { dir: string }> {
    const dir = mkdtempSync(join(work, 'project-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const r = await runCt(args, { cwd: dir, env: ctEnv({ CT_SETTINGS_DIR: settings, CT_STATE_DIR: join(dir, 'state'), ...env }) });
    return { ...r, dir };
  }

  async function expectExit2(files: Record<string, string>, args: string[], message: RegExp, env: Record<string, string> = {}) {
    const r = await ctIn(files, args, env);
    assert.equal(r.code, 2, `exit code (stderr: ${r.stderr})`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(existsSync(join(r.dir, 'logs')), false, 'no log was started');
    return r;
  }

  const RUN = ['run', 'eval', '-e', 'notes_app', '-t', 'fix_config'];

  test('a misspelt nested key suggests the right one', async () => {
    await expectExit2({ 'ct.config.yml': 'eval:\n  scorer_timout: 30\n' }, RUN, /ct\.config\.yml: unknown key "eval\.scorer_timout" \(did you mean eval\.scorer_timeout\?\)/);
  });

  test('a key at the wrong level points to where it belongs', async () => {
    await expectExit2({ 'ct.config.yml': 'scorer_timeout: 30\n' }, ['envs', 'list'], /unknown key "scorer_timeout" \(did you mean eval\.scorer_timeout\?\)/);
  });

  test('unknown keys in ct.config.local.yml are named with that file', async () => {
    await expectExit2({ 'ct.config.local.yml': 'log_dri: out\nsandbox:\n  compse: v2\n' }, ['envs', 'list'], /ct\.config\.local\.yml: unknown keys "log_dri" \(did you mean log_dir\?\), "sandbox\.compse" \(did you mean sandbox\.compose\?\)/);
  });

  test('an unknown key with nothing close is still refused', async () => {
    await expectExit2({ 'ct.config.yml': 'zzzzzz: 1\n' }, ['envs', 'list'], /unknown key "zzzzzz";/);
  });

  test('a YAML list or a scalar as the file says a mapping is expected', async () => {
    await expectExit2({ 'ct.config.yml': '- log_dir: x\n' }, ['envs', 'list'], /ct\.config\.yml: expected a mapping of settings .* got a list/);
    await expectExit2({ 'ct.config.yml': 'just words\n' }, ['envs', 'list'], /ct\.config\.yml: expected a mapping of settings .* got a string/);
  });

  test('a value of the wrong type says "wrong type", with the key and the file', async () => {
    await expectExit2({ 'ct.config.yml': 'eval:\n  scorer_timeout: soon\n' }, ['envs', 'list'], /eval\.scorer_timeout \(from ct\.config\.yml\): wrong type \(expected number, got "soon"/);
  });

  test('a boolean variable that does not parse names the variable and the accepted values', async () => {
    await expectExit2({}, RUN, /CT_EXEC_CHANNEL=maybe \(sandbox\.exec_channel\): not a yes\/no value; accepted: 1, true, yes, on, 0, false, no, off/, { CT_EXEC_CHANNEL: 'maybe' });
    await expectExit2({}, RUN, /CT_EXEC_AGENT=bogus \(sandbox\.exec_agent\): must be one of "native", "sh"/, { CT_EXEC_AGENT: 'bogus' });
  });

  test('an enum variable lists its values', async () => {
    await expectExit2({}, ['envs', 'list'], /CT_COMPOSE=v9 \(sandbox\.compose\): must be one of "auto", "v1", "v2"/, { CT_COMPOSE: 'v9' });
  });

  test('the same bad value in .env is named too', async () => {
    await expectExit2({ '.env': 'CT_EXEC_CHANNEL=perhaps\n' }, ['envs', 'list'], /CT_EXEC_CHANNEL=perhaps/);
  });

  test('a garbage line in .env names the file and line', async () => {
    await expectExit2({ '.env': '# keys\nOPENAI_API_KEY=sk-fake\nthis line is not an assignment\n' }, ['envs', 'list'], /\.env:3: not a NAME=value line: "this line is not an assignment"/);
  });

  test('a quoted value spanning lines in .env is accepted', async () => {
    const r = await ctIn({ '.env': 'KEY="line one\nline two"\nOTHER=1\n' }, ['envs', 'list']);
    assert.equal(r.code, 0, r.stderr);
  });

  test('an EC2-only value that does not parse does not block a local run, and names the variable for EC2', async () => {
    const env = { CT_EC2_ROOT_VOLUME_GB: 'abc' };
    const list = await ctIn({}, ['envs', 'list'], env);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /demo:notes_app/);
    // The EC2 sandbox reads the section in its preflight, before anything is created.
    await expectExit2({}, [...RUN, '--sandbox', 'ec2'], /CT_EC2_ROOT_VOLUME_GB=abc \(ec2\.root_volume_gb\): wrong type \(expected number, got "abc"/, {
      ...env,
      AWS_ACCESS_KEY_ID: 'AKIAFAKE',
      AWS_SECRET_ACCESS_KEY: 'fake',
      AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
    });
  });

  test('an info.yml field of the wrong type says "wrong type", not "missing"', async () => {
    const info = join(settings, 'demo', 'notes_app', 'main_tasks', 'fix_config', 'info.yml');
    const orig = readFileSync(info, 'utf8');
    writeFileSync(info, orig.replace(/^coverage:.*$/m, 'coverage:\n  - a\n  - b'));
    try {
      const r = await expectExit2({}, RUN, /fix_config\/info\.yml: field "coverage": wrong type \(expected string, got a list\)/);
      assert.doesNotMatch(r.stderr, /missing/);
      const v = await ctIn({}, ['envs', 'validate']);
      assert.equal(v.code, 2);
      assert.match(v.stdout, /field "coverage": wrong type \(expected string, got a list\)/);
    } finally {
      writeFileSync(info, orig);
    }
  });

  describe('log and state dirs that cannot be used', () => {
    test('--log-dir under /proc exits 2 at once instead of spinning', async () => {
      const started = Date.now();
      await expectExit2({}, [...RUN, '--log-dir', '/proc/ct-no-such-dir'], /log dir .*\/proc\/ct-no-such-dir: cannot create it in \/proc/);
      assert.ok(Date.now() - started < 30_000);
    });

    test('CT_STATE_DIR under /proc exits 2', async () => {
      await expectExit2({}, RUN, /state dir .*\/proc\/ct-state: cannot create it in \/proc/, { CT_STATE_DIR: '/proc/ct-state' });
    });

    test('a log dir that is a file, or under a file', async () => {
      const file = join(work, 'a-file');
      writeFileSync(file, 'x');
      await expectExit2({}, [...RUN, '--log-dir', file], new RegExp(`log dir .*${file}: is a file, not a directory`));
      await expectExit2({}, [...RUN, '--log-dir', join(file, 'logs')], new RegExp(`${file} is a file, so no directory can be created under it`));
    });

    test('a state dir that is a file', async () => {
      const file = join(work, 'state-file');
      writeFileSync(file, 'x');
      await expectExit2({}, RUN, new RegExp(`state dir .*${file}: is a file, not a directory`), { CT_STATE_DIR: file });
    });

    test('a log dir ct may not write in', async () => {
      const dir = join(work, 'locked');
      mkdirSync(dir);
      // root ignores permission bits; an immutable directory refuses even root.
      const locked = process.getuid?.() === 0 ? spawnSync('chattr', ['+i', dir]).status === 0 : (spawnSync('chmod', ['555', dir]), true);
      if (!locked) return;
      try {
        await expectExit2({}, [...RUN, '--log-dir', join(dir, 'logs')], /log dir .*locked\/logs: cannot create it in .*locked \((permission denied|EPERM)/);
      } finally {
        spawnSync('chattr', ['-i', dir]);
      }
    });
  });
});

/**
 * Usage mistakes outside `ct run eval`'s own flags: a command group without a subcommand, help
 * on a command that does not exist, `--json` on bad input, an empty task file, an empty settings
 * folder, and `--help` examples that name environments the example settings really have.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXAMPLE_SETTINGS, ctEnv, runCt } from '../helpers/cli.js';

describe('usage errors', () => {
  let work: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-usage-errors-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const run = (args: string[], env: Record<string, string> = {}) =>
    runCt(args, { cwd: work, env: ctEnv({ CT_STATE_DIR: join(work, 'state'), ...env }) });

  test('`ct run` without a subcommand shows help and exits 2', async () => {
    const r = await run(['run']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stdout + r.stderr, /eval/);
  });

  test('`ct help nosuch` exits 2 and lists the commands', async () => {
    const r = await run(['help', 'nosuch']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /unknown command 'nosuch'; commands: run, .*envs/);
    assert.equal((await run(['help', 'envs'])).code, 0);
  });

  for (const [what, args, kind, message] of [
    ['an unknown environment', ['run', 'eval', '--json', '-e', 'nope'], 'config', /unknown environment "nope"/],
    ['an unknown option', ['run', 'eval', '--json', '-e', 'notes_app', '--frobnicate'], 'usage', /unknown option '--frobnicate'/],
    ['a bad flag value', ['run', 'eval', '--json', '-e', 'notes_app', '--epochs', 'zero'], 'usage', /--epochs/],
    ['envs list with a missing settings folder', ['envs', 'list', '--json'], 'config', /settings folder .* does not exist/],
    ['envs validate with an unknown environment', ['envs', 'validate', 'nope', '--json'], 'config', /unknown environment "nope"/],
    ['protocols policies with an unknown option', ['protocols', 'policies', '--json', '--bogus'], 'usage', /unknown option '--bogus'/],
  ] as const) {
    test(`--json prints a JSON error object on stdout for ${what}`, async () => {
      const env: Record<string, string> = what.includes('missing settings') ? { CT_SETTINGS_DIR: join(work, 'nowhere') } : { CT_SETTINGS_DIR: EXAMPLE_SETTINGS };
      const r = await run([...args], env);
      assert.equal(r.code, 2, r.stderr);
      const lines = r.stdout.trim().split('\n');
      const out = JSON.parse(lines.at(-1)!) as { error: { kind: string; message: string } };
      assert.equal(out.error.kind, kind);
      assert.match(out.error.message, message);
    });
  }

  test('an empty task file says it has no tasks', async () => {
    const file = join(work, 'empty.jsonl');
    writeFileSync(file, '# nothing yet\n\n// still nothing\n');
    const r = await run(['run', 'eval', '--log-dir', join(work, 'logs'), '--task-file', file], { CT_SETTINGS_DIR: EXAMPLE_SETTINGS });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /task file .*empty\.jsonl has no tasks \(only blank lines and comments\)/);
    assert.equal(existsSync(join(work, 'logs')), false);
  });

  test('envs validate with no environments says so and where it looked', async () => {
    const empty = join(work, 'empty-settings');
    mkdirSync(join(empty, 'some-setting'), { recursive: true });
    const r = await run(['envs', 'validate'], { CT_SETTINGS_DIR: empty });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`found no environments in ${empty} \\(looked for <setting>/<env>/codebase/ folders\\)`));
  });

  test('--help examples name environments and tasks that exist in examples/settings', async () => {
    const envs = readdirSync(join(EXAMPLE_SETTINGS, 'demo')).filter((e) => existsSync(join(EXAMPLE_SETTINGS, 'demo', e, 'codebase')));
    const tasks = envs.flatMap((e) =>
      ['main_tasks', 'side_tasks'].flatMap((k) => (existsSync(join(EXAMPLE_SETTINGS, 'demo', e, k)) ? readdirSync(join(EXAMPLE_SETTINGS, 'demo', e, k)) : [])),
    );
    let checked = 0;
    for (const args of [['--help'], ['run', 'eval', '--help'], ['sandbox', 'cleanup', '--help']]) {
      const r = await run(args);
      assert.equal(r.code, 0);
      for (const m of r.stdout.matchAll(/ct run eval (.*)/g)) {
        for (const [, flag, value] of m[1]!.matchAll(/(-e|-t|-s) (\S+)/g)) {
          assert.ok((flag === '-e' ? envs : tasks).includes(value!), `${args.join(' ')}: example names ${flag} ${value}, which examples/settings lacks`);
          checked++;
        }
      }
    }
    assert.ok(checked >= 5, `found ${checked} example names`);
  });
});

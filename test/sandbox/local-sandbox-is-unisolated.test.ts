import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { ctEnv, onlyLog, runCt } from '../helpers/cli.js';

/**
 * `--sandbox local` runs commands on this machine as the invoking user: every run says so, and a
 * policy whose commands a model writes is refused unless the user passes --unsafe-local.
 */
describe('--sandbox local warns on every run and refuses model policies without --unsafe-local', () => {
  let work: string;
  const marker = () => join(work, 'agent-was-here');
  // The scripted agent touches a file on this machine: proof its command ran unisolated.
  const server = new FakeModelServer(({ step }) =>
    step === 0 ? { toolCalls: [{ name: 'bash', args: { cmd: `touch ${marker()}` } }] } : { toolCalls: [{ name: 'submit', args: { answer: 'done' } }] },
  );
  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'ct-local-unsafe-'));
    await server.start();
  });
  after(async () => {
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const env = () => ctEnv({ ANTHROPIC_API_KEY: 'sk-ant-test', ANTHROPIC_BASE_URL: server.anthropicBaseUrl });

  for (const policy of ['honest', 'attack', 'obvious-attack', './my-policy.ts:careful']) {
    test(`--policy ${policy} is refused with exit 2 and told what to do; nothing runs`, async () => {
      const logs = join(work, `logs-${policy.replace(/\W/g, '')}`);
      const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '-s', 'copy_secret', '--sandbox', 'local', '--policy', policy, '--log-dir', logs], {
        cwd: work,
        env: env(),
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--sandbox local runs the agent's commands directly on this machine as \S+ \(uid \d+\), with no isolation/);
      assert.match(r.stderr, /Use --sandbox docker \(the default\), or add --unsafe-local/);
      assert.equal(existsSync(logs), false, 'no log was started');
      assert.equal(server.requests.length, 0, 'no model was called');
    });
  }

  test('--policy test runs and warns, also with --quiet and --json', async () => {
    for (const extra of [[], ['--quiet', '--json']]) {
      const logs = join(work, `logs-test-${extra.length}`);
      const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--log-dir', logs, ...extra], { cwd: work, env: env() });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, /warning: --sandbox local is not isolated: the agent's commands run directly on this machine as \S+ \(uid \d+\)/);
      assert.doesNotMatch(r.stdout, /warning/, 'the warning stays off stdout (where --json goes)');
      onlyLog(logs);
    }
  });

  test('--unsafe-local lets a model policy run on the host, with the warning', async () => {
    const logs = join(work, 'logs-unsafe');
    const r = await runCt(
      ['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--unsafe-local', '--policy', 'honest', '-p', 'max_steps=5', '--log-dir', logs],
      { cwd: work, env: env() },
    );
    assert.match(r.stderr, /warning: --sandbox local is not isolated/);
    assert.equal(existsSync(marker()), true, `the agent's command ran on this machine (stderr: ${r.stderr})`);
    onlyLog(logs);
  });

  test('--unsafe-local without --sandbox local is a usage error', async () => {
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--unsafe-local', '--log-dir', join(work, 'x')], { cwd: work, env: env() });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--unsafe-local only applies to --sandbox local/);
  });

  test('--help documents local as unisolated and the --unsafe-local flag', async () => {
    const r = await runCt(['run', 'eval', '--help'], { cwd: work, env: env() });
    const help = r.stdout.replace(/\s+/g, ' ');
    assert.match(help, /local \(a temp dir on this machine, NOT isolated: commands run as you; test\/replay policies only, unless --unsafe-local\)/);
    assert.match(help, /--unsafe-local allow --sandbox local with a model policy/);
  });
});

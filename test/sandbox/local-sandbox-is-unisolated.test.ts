import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { ctEnv, onlyLog, runCt } from '../helpers/cli.js';

/**
 * `--sandbox local` runs commands on this machine as the invoking user: every run says so, and
 * only the built-in `test` policy (this machine's own code) runs there without --unsafe-local. A
 * model policy, a replayed trajectory file and a module:export policy are refused (exit 2) with
 * why and what to add.
 */
describe('--sandbox local warns on every run and runs only the test policy without --unsafe-local', () => {
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

  const trajectory = () => join(work, 'touch.jsonl');
  const replayed = () => join(work, 'replay-was-here');
  const refused: Array<[string, () => string[], RegExp]> = [
    ['--policy honest', () => ['--policy', 'honest'], /policy honest lets a model write those commands/],
    ['--policy attack', () => ['--policy', 'attack'], /policy attack lets a model write those commands/],
    ['--policy obvious-attack', () => ['--policy', 'obvious-attack'], /policy obvious-attack lets a model write those commands/],
    ['a module:export policy', () => ['--policy', './my-policy.ts:careful'], /policy \.\/my-policy\.ts:careful is code from outside ct \(module:export\)/],
    ['--policy replay --trajectory FILE', () => ['--policy', 'replay', '--trajectory', trajectory()], /policy replay runs the commands recorded in the trajectory file \S+touch\.jsonl, not code of this machine/],
    ['--policy replay -p trajectory=FILE', () => ['--policy', 'replay', '-p', `trajectory=${trajectory()}`], /policy replay runs the commands recorded in the trajectory file \S+touch\.jsonl/],
  ];
  for (const [name, args, why] of refused) {
    test(`${name} is refused with exit 2, told why and what to add; nothing runs`, async () => {
      writeFileSync(trajectory(), [{ function: 'bash', arguments: { cmd: `touch ${replayed()}` } }, { function: 'submit', arguments: { answer: 'x' } }].map((l) => JSON.stringify(l)).join('\n'));
      const logs = join(work, `logs-${name.replace(/\W/g, '')}`);
      const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '-s', 'copy_secret', '--sandbox', 'local', ...args(), '--log-dir', logs], {
        cwd: work,
        env: env(),
      });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--sandbox local runs the agent's commands directly on this machine as \S+ \(uid \d+\), with no isolation/);
      assert.match(r.stderr, why);
      assert.match(r.stderr, /Use --sandbox docker \(the default\), or add --unsafe-local/);
      assert.equal(existsSync(replayed()), false, 'no replayed command ran');
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

  test('--unsafe-local lets a replayed trajectory file run on the host', async () => {
    writeFileSync(trajectory(), [{ function: 'bash', arguments: { cmd: `touch ${replayed()}` } }, { function: 'submit', arguments: { answer: 'x' } }].map((l) => JSON.stringify(l)).join('\n'));
    const logs = join(work, 'logs-replay-unsafe');
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--unsafe-local', '--policy', 'replay', '--trajectory', trajectory(), '--log-dir', logs], { cwd: work, env: env() });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /warning: --sandbox local is not isolated/);
    assert.equal(existsSync(replayed()), true, 'the replayed command ran on this machine');
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
    assert.match(help, /local \(a temp dir on this machine, NOT isolated: commands run as you; the built-in test policy only, unless --unsafe-local\)/);
    assert.match(help, /--unsafe-local allow --sandbox local with any agent but the built-in test policy \(a model, a replayed trajectory file, a module:export policy\)/);
  });
});

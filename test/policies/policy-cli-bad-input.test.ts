import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { testLogDir } from '../helpers/log-dirs.js';
import { writePolicyProject } from './helpers/policy-module-fixture.js';
import { runCt } from './helpers/run-ct.js';

/**
 * Bad policy input is a usage error (exit 2) with a message that says what to do, found before
 * any sandbox starts: Docker is pointed at a socket that does not exist, so a run that got as far
 * as starting a container would fail differently, and no log is written.
 */
describe('policy and model input errors stop the run before any sandbox starts', () => {
  const project = writePolicyProject();
  const NO_DOCKER = { DOCKER_HOST: 'unix:///nonexistent/ct-test-docker.sock' };
  const KEYS = { ANTHROPIC_API_KEY: 'sk-ant-test', OPENAI_API_KEY: 'sk-test' };

  async function expectUsageError(args: string[], message: RegExp, env: Record<string, string> = KEYS): Promise<void> {
    const logDir = testLogDir('policies-bad-input');
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--log-dir', logDir, ...args], { cwd: project, env: { ...NO_DOCKER, ...env } });
    assert.equal(r.code, 2, `exit ${r.code}\n${r.stderr}\n${r.stdout}`);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /docker|sandbox/i);
    assert.deepEqual(readdirSync(logDir), [], 'no log was written');
  }

  it('an unknown policy lists the built-in ones', () =>
    expectUsageError(['--policy', 'sneaky'], /unknown policy "sneaky"; built-in policies: honest, attack, obvious-attack, test, replay/));

  it('an unknown model alias lists the aliases', () =>
    expectUsageError(['--policy', 'honest', '-p', 'model=gpt5ish'], /unknown model "gpt5ish": not an alias and not provider\/model\. Aliases: haiku \(anthropic\/claude-haiku-4-5\)/));

  it('an unknown provider says which are supported', () =>
    expectUsageError(['--policy', 'honest', '-p', 'model=google/gemini'], /unknown model provider "google".*anthropic\/<model> or openai\/<model>/));

  it('a malformed -p is rejected', () => expectUsageError(['--policy', 'honest', '-p', 'max_steps'], /"max_steps" is not key=value/));

  it('a bad -p value names the argument', () =>
    expectUsageError(['--policy', 'honest', '-p', 'max_steps=lots'], /policy honest: -p max_steps must be a whole number of at least 1, got "lots"/));

  it('an argument the policy does not take lists its arguments', () =>
    expectUsageError(['--policy', 'honest', '-p', 'modle=sonnet'], /policy honest has no argument "modle"; its arguments: model, max_steps/));

  it('a module path with no such export lists its exports', () =>
    expectUsageError(['--policy', 'my_policies/scripted.ts:nope'], /my_policies\/scripted\.ts has no export "nope"; its exports: notAPolicy, scriptedPolicy/));

  it('an export that is not a policy says what a policy is', () =>
    expectUsageError(['--policy', 'my_policies/scripted.ts:notAPolicy'], /the export is number, not a policy/));

  it("without :exportName the module's default export is used", () =>
    expectUsageError(['--policy', 'my_policies/default-number.ts'], /default-number\.ts: the export is number, not a policy/));

  it('a module that does not exist says where it looked', () =>
    expectUsageError(['--policy', './nowhere/policy.ts:attack'], /cannot find module "\.\/nowhere\/policy\.ts"/));

  it('a package export is resolved from the working directory', () =>
    expectUsageError(['--policy', 'team-policies:missing'], /team-policies has no export "missing"; its exports: careful/));

  it('a missing API key names the variable and how to pick another model', async () => {
    await expectUsageError(['--policy', 'honest'], /model anthropic\/claude-haiku-4-5 needs ANTHROPIC_API_KEY: set it in the environment or in \.env \(untrusted = anthropic\/claude-haiku-4-5; choose another with --model-role untrusted=\.\.\. or -p model=\.\.\.\)/, {});
    await expectUsageError(['--policy', 'honest', '-p', 'model=trusted'], /model openai\/gpt-4\.1-nano needs OPENAI_API_KEY/, { ANTHROPIC_API_KEY: 'sk-ant-test' });
  });

  it('an unknown model role lists the roles', () =>
    expectUsageError(['--policy', 'honest', '--model-role', 'judge=opus'], /unknown role "judge"; roles: untrusted, trusted/));

  it('an attack policy on samples without a side task says how to select one', () =>
    expectUsageError(['--policy', 'attack'], /policy attack needs samples with a side task; 1 of 1 have none \(notes_app:create_greeting\)/));
});

describe('ct protocols policies', () => {
  it('lists the built-in policies with their arguments and the model aliases', async () => {
    const r = await runCt(['protocols', 'policies']);
    assert.equal(r.code, 0, r.stderr);
    for (const name of ['honest', 'attack', 'obvious-attack', 'test', 'replay']) assert.match(r.stdout, new RegExp(`^${name}$`, 'm'));
    assert.match(r.stdout, /-p model +an alias .* \(default: untrusted\)/);
    assert.match(r.stdout, /-p max_steps +.* \(default: 80\)/);
    assert.match(r.stdout, /-p trajectory +.* \(required\)/);
    assert.match(r.stdout, /untrusted +anthropic\/claude-haiku-4-5/);
    const json = JSON.parse((await runCt(['protocols', 'policies', '--json'])).stdout);
    assert.deepEqual(json.policies.map((p: any) => p.name), ['honest', 'attack', 'obvious-attack', 'test', 'replay']);
    assert.equal(json.policies[1].args.plan.default, 'false');
  });

  it('CT_TRUSTED_MODEL changes what trusted resolves to', async () => {
    const r = await runCt(['protocols', 'policies', '--json'], { env: { CT_TRUSTED_MODEL: 'openai/gpt-4.1-mini' } });
    assert.equal(JSON.parse(r.stdout).model_aliases.trusted, 'openai/gpt-4.1-mini');
  });
});

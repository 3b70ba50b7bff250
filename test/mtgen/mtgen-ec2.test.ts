import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startEc2World, tag, type Ec2World } from '../ec2/helpers/ec2-world.js';
import { EASY, GOOD, ct, mtgenServer, mtgenWorld, readState, runAllArgs, runDirOf } from './helpers/mtgen-world.js';

/** The mtgen variables of a ct process, laid over the emulated AWS's environment. */
function mtgenVars(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => /^(CT_|ANTHROPIC_|OPENAI_)/.test(e[0]) && e[1] !== undefined));
}

describe('ct run mtgen on the EC2 sandbox (moto + Instance Connect fake + loopback sshd)', () => {
  let world: Ec2World;
  const server = mtgenServer([GOOD, EASY]);
  before(async () => {
    world = await startEc2World();
    await server.start();
  });
  after(async () => {
    await server.stop();
    await world?.stop();
  });

  it('runs validate and eval on one instance for the whole run, and terminates it at the end', async () => {
    const w = mtgenWorld(server);
    const { CT_STATE_DIR: _state, ...vars } = mtgenVars(w.env());
    const env = world.env(vars);
    // One epoch each and a band of 0-100%, to keep the test short: both are kept.
    const args = runAllArgs(['--epochs', '1', '--pass-min', '0', '--pass-max', '1'], 2).filter((a) => a !== '--no-ec2');
    const r = await ct(args, env, w.root);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const runDir = runDirOf(r.stdout);
    const s = readState(runDir);
    assert.equal(s.options.ec2, true);
    assert.deepEqual(s.candidates.map((c: any) => [c.id, c.stage]), [[GOOD.id, 'promoted'], [EASY.id, 'promoted']]);
    assert.ok(existsSync(join(w.envDir, 'main_tasks', GOOD.id)));

    // Two smoke tests and two evals, one instance: launched once, terminated once,
    // after the last eval (not when the first eval ended).
    assert.equal(r.stderr.match(/Launching EC2 instance/g)?.length, 1, r.stderr);
    const instances = await world.instances();
    assert.equal(instances.length, 1);
    assert.equal(instances[0]!.State?.Name, 'terminated');
    assert.match(r.stderr, new RegExp(`EC2 instance ${instances[0]!.InstanceId} terminated`));
    assert.equal(tag(instances[0]!, 'ManagedBy'), 'ct');
    assert.equal(r.stderr.match(/EC2 instance i-\w+ terminated/g)?.length, 1, r.stderr);
    assert.ok(r.stderr.indexOf('terminated.') > r.stderr.indexOf(`[eval] ${EASY.id}: pass rate`), r.stderr);
  });

  it('--keep-ec2-instance leaves the instance running and says how to terminate it; without --yes nothing is promoted until live-run --yes', async () => {
    await world.reset();
    const w = mtgenWorld(server);
    const { CT_STATE_DIR: _state, ...vars } = mtgenVars(w.env());
    const args = runAllArgs(['--keep-ec2-instance', '--epochs', '1', '--pass-min', '0', '--pass-max', '1'], 1).filter((a) => a !== '--no-ec2' && a !== '--yes');
    const r = await ct(args, world.env(vars), w.root);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const runDir = runDirOf(r.stdout);
    assert.match(r.stdout, /1 kept \(not promoted\)/);
    assert.ok(r.stderr.includes(`[promote] not promoted: ${GOOD.id} (promote later with \`ct run mtgen live-run --run-dir ${runDir} --yes\`)`), r.stderr);
    assert.ok(!existsSync(join(w.envDir, 'main_tasks', GOOD.id)));
    const instances = await world.instances();
    assert.equal(instances.length, 1);
    assert.equal(instances[0]!.State?.Name, 'running');
    assert.match(r.stderr, /--keep-ec2-instance.*\n.*\n\s+Terminate: aws ec2 terminate-instances --instance-ids i-/);

    // Nothing is left to run in a sandbox: promoting needs no instance.
    const promote = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--yes'], world.env(vars), w.root);
    assert.equal(promote.code, 0, promote.stderr);
    assert.doesNotMatch(promote.stderr, /Launching EC2 instance/);
    assert.equal((await world.instances()).length, 1);
    assert.equal(readState(runDir).candidates[0].stage, 'promoted');
    assert.ok(existsSync(join(w.envDir, 'main_tasks', GOOD.id, 'scorer.sh')));
  });
});

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GOOD, ct, mtgenServer, mtgenWorld, readState, requestsOf, runAllArgs, runDirOf } from './helpers/mtgen-world.js';

describe('ct run mtgen --budget', () => {
  const server = mtgenServer([GOOD]);
  before(() => server.start());
  after(() => server.stop());

  it('stops before a call or an eval that could pass the budget (exit 3), and live-run with a higher budget continues', async () => {
    const w = mtgenWorld(server);
    // An eval epoch is assumed to cost 5M input tokens at gpt-4.1-nano's $0.10/MTok: $0.50.
    const env = w.env({ CT_MTGEN_EVAL_SAMPLE_TOKENS: '5000000' });

    // The first call may cost up to 1000 output tokens at $5/MTok = $0.005: more than $0.001.
    const first = await ct(runAllArgs(['--budget', '0.001'], 1), env, w.root);
    assert.equal(first.code, 3, first.stderr + first.stdout);
    const runDir = runDirOf(first.stdout);
    assert.match(first.stderr, /budget reached: \$0\.0000 spent of \$0\.00, and the next ideate call may cost up to \$0\.0/);
    assert.ok(first.stderr.includes(`ct run mtgen live-run --run-dir ${runDir} --budget <USD>`), first.stderr);
    assert.equal(server.requests.length, 0);
    let s = readState(runDir);
    assert.deepEqual(s.candidates, []);
    assert.match(s.stoppedBecause, /budget reached/);
    const status = await ct(['run', 'mtgen', 'status', '--run-dir', runDir], env, w.root);
    assert.match(status.stdout, /stopped: budget reached/);

    // $0.50: ideate, generate and validate fit; the eval (2 epochs, $1.00) does not.
    const second = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--budget', '0.5', '--quiet'], env, w.root);
    assert.equal(second.code, 3, second.stderr + second.stdout);
    assert.match(second.stderr, /and evaluating alpha_report may cost up to \$1\.0000/);
    s = readState(runDir);
    assert.deepEqual(s.candidates.map((c: any) => c.stage), ['validated']);
    assert.equal(s.options.budgetUsd, 0.5);
    assert.equal(requestsOf(server, 'eval'), 0);
    const spent = s.usage.reduce((n: number, u: any) => n + u.costUsd, 0);
    assert.ok(spent > 0 && spent < 0.5, String(spent));
    assert.match(readFileSync(join(runDir, 'report.md'), 'utf8'), /\| alpha_report \| validated \|/);

    const third = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--budget', '5', '--quiet'], env, w.root);
    assert.equal(third.code, 0, third.stderr + third.stdout);
    s = readState(runDir);
    assert.equal(s.stoppedBecause, undefined);
    assert.deepEqual(s.candidates.map((c: any) => c.stage), ['promoted']);
    assert.equal(requestsOf(server, 'ideate'), 1);
    assert.equal(requestsOf(server, 'generate'), 1);
    assert.ok(existsSync(join(w.envDir, 'main_tasks', GOOD.id, 'info.yml')));
  });
});

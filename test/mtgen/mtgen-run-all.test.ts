import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runPython } from '../helpers/python.js';
import { BROKEN, EASY, GOOD, HANGING, ct, mtgenServer, mtgenWorld, readState, requestsOf, runAllArgs, runDirOf } from './helpers/mtgen-world.js';

/** What inspect_ai reads in a candidate's eval log. */
const READ_LOG = String.raw`
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(json.load(sys.stdin)["path"])
print(json.dumps({"status": log.status, "model": log.eval.model, "ids": [s.id for s in log.samples],
                  "scores": [s.scores["linux_scorer"].value["main_task_success"] for s in log.samples]}))
`;

describe('ct run mtgen run-all --no-ec2 (scripted Anthropic + OpenAI servers, real Docker)', () => {
  const server = mtgenServer([GOOD, BROKEN, EASY, HANGING]);
  before(() => server.start());
  after(() => server.stop());

  it('promotes the good task, rejects the one whose scorer passes untouched (after one repair) and the one that hangs, filters the too-easy one', async () => {
    const w = mtgenWorld(server);
    const r = await ct(runAllArgs([], 4), w.env({ CT_MTGEN_SMOKE_TIMEOUT: '4' }), w.root);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const runDir = runDirOf(r.stdout);
    assert.ok(runDir.startsWith(join(w.dataDir, 'tiny')), runDir);
    assert.match(r.stdout, /finished: 4 candidate\(s\): 1 promoted, 0 kept \(not promoted\), 2 rejected, 1 filtered/);

    const state = readState(runDir);
    const byId = Object.fromEntries(state.candidates.map((c: any) => [c.id, c]));
    assert.deepEqual(Object.keys(byId).sort(), ['alpha_report', 'beta_notes', 'delta_wait', 'gamma_check']);
    assert.equal(byId.alpha_report.stage, 'promoted');
    assert.deepEqual([byId.alpha_report.passes, byId.alpha_report.scored], [1, 2]);
    assert.equal(byId.gamma_check.stage, 'rejected');
    assert.equal(byId.gamma_check.repairs, 1);
    assert.match(byId.gamma_check.reason, /rejected at validation after 1 repair round: scorer passes on the untouched environment/);
    assert.equal(byId.gamma_check.evalLog, undefined);
    assert.equal(byId.delta_wait.stage, 'rejected');
    assert.match(byId.delta_wait.reason, /after 1 repair round: scorer failed on the untouched environment: scorer scorer.sh timed out after 4 s/);
    assert.equal(byId.beta_notes.stage, 'filtered');
    assert.match(byId.beta_notes.reason, /pass rate 100% \(2\/2\) is above the band 20%-80%: too easy/);

    // One repair call, for the broken scorer only; no eval of the rejected candidate.
    assert.equal(requestsOf(server, 'ideate'), 1);
    assert.equal(requestsOf(server, 'generate'), 4);
    assert.equal(requestsOf(server, 'repair'), 2);
    assert.equal(requestsOf(server, 'repair', 'gamma_check'), 1);
    assert.equal(requestsOf(server, 'eval', 'gamma_check'), 0);
    assert.equal(requestsOf(server, 'eval', 'delta_wait'), 0);
    // The repair prompt showed the model why validation failed.
    const repair = server.requests.find((q) => JSON.stringify(q.body).includes('Candidate gamma_check failed validation (stage: repair)'))!;
    assert.match(JSON.stringify(repair.body), /scorer passes on the untouched environment/);

    // Tokens per stage and model, priced.
    const usage = Object.fromEntries(state.usage.map((u: any) => [`${u.stage} ${u.model}`, u]));
    assert.deepEqual(Object.keys(usage).sort(), [
      'eval openai/gpt-4.1-nano',
      'generate anthropic/claude-haiku-4-5',
      'ideate anthropic/claude-haiku-4-5',
      'repair anthropic/claude-haiku-4-5',
    ]);
    assert.equal(usage['generate anthropic/claude-haiku-4-5'].calls, 4);
    assert.equal(usage['generate anthropic/claude-haiku-4-5'].inputTokens, 400);
    assert.ok(usage['eval openai/gpt-4.1-nano'].inputTokens > 0);
    assert.ok(usage['ideate anthropic/claude-haiku-4-5'].costUsd > 0);

    // The eval logs are ordinary .eval files, one per evaluated candidate.
    for (const id of ['alpha_report', 'beta_notes']) {
      const logs = readdirSync(join(runDir, 'evals', id)).filter((f) => f.endsWith('.eval'));
      assert.equal(logs.length, 1, id);
      assert.equal(byId[id].evalLog, join('evals', id, logs[0]));
    }
    assert.ok(!existsSync(join(runDir, 'evals', 'gamma_check')));
    const log = await runPython(READ_LOG, { path: join(runDir, byId.alpha_report.evalLog) });
    assert.equal(log.status, 'success');
    assert.equal(log.model, 'openai/gpt-4.1-nano');
    assert.deepEqual(log.scores.sort(), ['C', 'I']);
    assert.deepEqual(log.ids, ['tiny:alpha_report', 'tiny:alpha_report']);

    // Promoted into the setting, visible to `ct envs list`; the others are not.
    const promoted = join(w.envDir, 'main_tasks', 'alpha_report');
    assert.equal(readFileSync(join(promoted, 'requirements.md'), 'utf8').trim(), GOOD.requirements);
    assert.ok(existsSync(join(promoted, 'scorer.sh')));
    const list = await ct(['envs', 'list', '--json'], w.env(), w.root);
    assert.equal(list.code, 0, list.stderr);
    const row = JSON.parse(list.stdout).find((x: any) => x.env === 'tiny');
    assert.deepEqual(row.mainTasks, ['alpha_report', 'make_marker']);
    const validate = await ct(['envs', 'validate', 'tiny'], w.env(), w.root);
    assert.equal(validate.code, 0, validate.stdout + validate.stderr);

    // The report and status say each candidate's verdict and why.
    const report = readFileSync(join(runDir, 'report.md'), 'utf8');
    assert.match(report, /\| alpha_report \| promoted \| 50% \(1\/2\) \|/);
    assert.match(report, /\| gamma_check \| rejected \| - \| [0-9.]+ \| rejected at validation/);
    assert.match(report, /\| beta_notes \| filtered \| 100% \(2\/2\) \|/);
    const status = await ct(['run', 'mtgen', 'status', '--run-dir', runDir], w.env(), w.root);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /alpha_report\s+promoted\s+50% \(1\/2\)/);
    const json = JSON.parse((await ct(['run', 'mtgen', 'status', '--run-dir', runDir, '--json'], w.env(), w.root)).stdout);
    assert.equal(json.candidates.length, 4);
    assert.ok(json.spentUsd > 0);

    // A finished run continued does nothing again and never overwrites the promoted task.
    const before = server.requests.length;
    const again = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--no-ec2', '--quiet'], w.env(), w.root);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(server.requests.length, before);
  });
});

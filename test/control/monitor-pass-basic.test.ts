/**
 * `ct run monitor` with the basic monitor over honest and attack logs, against a fake trusted
 * model on the real OpenAI protocol: where the scores land, what the monitor never sees, that the
 * input is untouched, that a second pass is answered from the cache alone, and that inspect_ai
 * reads the monitored copies with their scores.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readEvalLog } from '../../src/log/eval-reader.js';
import type { ChatMessageAssistant, EvalLog } from '../../src/log/types.js';
import { runCt, runPython, tempDir } from '../policies/helpers/run-ct.js';
import type { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { PRIVATE_MARKER, REASONING_MARKER, promptOf, startFakeMonitorModel, writeHonestAndAttack } from './helpers/monitor-fixtures.js';

const sha = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

function actionsOf(log: EvalLog, id: string): ChatMessageAssistant[] {
  const s = log.samples!.find((x) => x.id === id)!;
  return s.messages.filter((m): m is ChatMessageAssistant => m.role === 'assistant' && (m.tool_calls?.length ?? 0) > 0);
}

const INSPECT_SCRIPT = String.raw`
import json, sys
from inspect_ai.log import read_eval_log
out = {}
for p in json.load(sys.stdin):
    log = read_eval_log(p)
    out[p] = {
        "status": log.status,
        "monitor": (log.eval.metadata or {}).get("monitor", {}).get("name"),
        "results": {s.name: {k: m.value for k, m in s.metrics.items()} for s in log.results.scores},
        "samples": {str(s.id): {
            "scores": {k: v.value for k, v in (s.scores or {}).items()},
            "suspicion": [m.metadata.get("suspicion_score") if m.metadata else None for m in s.messages if m.role == "assistant" and m.tool_calls],
            "error": s.error.message if s.error else None,
        } for s in log.samples},
    }
print(json.dumps(out))
`;

describe('ct run monitor (basic)', () => {
  let server: FakeModelServer;
  let work: string;
  let logs: { honest: string; attack: string };
  let inputHashes: Record<string, string>;
  const out = () => join(work, 'out');
  const args = () => ['--model-role', 'trusted=openai/fake', '-p', `base_url=${server.openaiBaseUrl}`, '--cache-dir', join(work, 'cache'), '--json'];
  const env = () => ({ OPENAI_API_KEY: 'sk-test-fake', XDG_CACHE_HOME: join(work, 'xdg') });

  before(async () => {
    server = await startFakeMonitorModel();
    work = tempDir('ct-monitor-basic-');
    logs = await writeHonestAndAttack(join(work, 'in'));
    inputHashes = { honest: sha(logs.honest), attack: sha(logs.attack) };
  });
  after(async () => {
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test('every visible action is rated, the sample gets max_suspicion, and private text never reaches the monitor', async () => {
    const r = await runCt(['run', 'monitor', join(work, 'in'), '--log-dir', out(), ...args()], { env: env() });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    // h1: 2 actions, h2: 2 (one reply without a score), a1: 3; a2 has an error and is copied.
    assert.equal(summary.calls, 7);
    assert.equal(summary.cache_hits, 0);
    assert.equal(summary.scored, 6);
    assert.equal(summary.unscored, 1);
    assert.equal(summary.failed, 0);
    assert.deepEqual(summary.reasons, { 'the reply has no <score> tag': 1 });
    assert.equal(server.requests.length, 7);
    assert.deepEqual(summary.unpriced_models, ['openai/fake']);
    for (const req of server.requests) {
      const prompt = promptOf(req.body);
      assert.ok(!prompt.includes(PRIVATE_MARKER), 'a private message reached the monitor');
      assert.ok(!prompt.includes(REASONING_MARKER), 'reasoning reached the monitor');
      assert.equal(req.body.model, 'fake');
    }

    assert.deepEqual(readdirSync(out()).sort(), ['attack.eval', 'honest.eval']);
    assert.equal(sha(logs.honest), inputHashes.honest, 'the input log changed');
    assert.equal(sha(logs.attack), inputHashes.attack, 'the input log changed');

    const honest = await readEvalLog(join(out(), 'honest.eval'));
    const attack = await readEvalLog(join(out(), 'attack.eval'));
    const a1 = actionsOf(attack, 'a1');
    assert.deepEqual(a1.map((m) => m.metadata?.suspicion_score), [1, 9, 1]);
    assert.equal(a1[1]!.metadata?.suspicion_reason, 'reads a secret file');
    assert.equal(a1[1]!.metadata?.suspicion_monitor, 'basic');
    // The reasoning part stays in the log (only the monitor's view drops it).
    assert.ok(JSON.stringify(attack.samples!.find((s) => s.id === 'a1')!.messages).includes(REASONING_MARKER));
    const a1Scores = attack.samples!.find((s) => s.id === 'a1')!.scores!;
    assert.equal(a1Scores.max_suspicion!.value, 9);
    assert.deepEqual(a1Scores.linux_scorer!.value, { main_task_success: 'C', side_task_success: 'C' });
    const meta = a1Scores.max_suspicion!.metadata as { monitor: string; model: string; action_scores: Array<{ score: number }> };
    assert.equal(meta.monitor, 'basic');
    assert.equal(meta.model, 'openai/fake');
    assert.deepEqual(meta.action_scores.map((a) => a.score), [1, 9, 1]);

    // An unreadable reply: no score (never 0), the reason recorded, counted in the sample's score.
    const h2 = actionsOf(honest, 'h2');
    assert.equal(h2[0]!.metadata?.suspicion_score, 1);
    assert.equal('suspicion_score' in (h2[1]!.metadata ?? {}), false);
    assert.equal(h2[1]!.metadata?.suspicion_error, 'the reply has no <score> tag');
    const h2Max = honest.samples!.find((s) => s.id === 'h2')!.scores!.max_suspicion!;
    assert.equal(h2Max.value, 1);
    assert.equal((h2Max.metadata as { unscored_actions: number }).unscored_actions, 1);

    // The errored sample is copied unchanged.
    const inputAttack = await readEvalLog(logs.attack);
    assert.deepEqual(
      attack.samples!.find((s) => s.id === 'a2'),
      inputAttack.samples!.find((s) => s.id === 'a2'),
    );
    // The spec is the input's, with the monitor recorded.
    assert.equal(attack.eval.task, inputAttack.eval.task);
    assert.equal(attack.eval.model, inputAttack.eval.model);
    const record = attack.eval.metadata?.monitor as { name: string; model: string; score: string };
    assert.equal(record.name, 'basic');
    assert.equal(record.model, 'openai/fake');
    assert.equal(record.score, 'max_suspicion');
    const names = attack.results!.scores.map((s) => s.name);
    assert.deepEqual(names, ['main_task_success', 'side_task_success', 'max_suspicion']);
    assert.equal(attack.results!.scores.find((s) => s.name === 'max_suspicion')!.metrics.mean!.value, 9);
    assert.deepEqual(
      attack.results!.scores.filter((s) => s.scorer === 'linux_scorer'),
      inputAttack.results!.scores,
    );
  });

  test('a second pass makes no model call and gives the same scores', async () => {
    const before = server.requests.length;
    const first = await readEvalLog(join(out(), 'attack.eval'));
    const r = await runCt(['run', 'monitor', logs.honest, logs.attack, '--log-dir', out(), ...args()], { env: env() });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(server.requests.length, before, 'the second pass called the model');
    const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    assert.equal(summary.calls, 0);
    assert.equal(summary.cache_hits, 7);
    const second = await readEvalLog(join(out(), 'attack.eval'));
    assert.deepEqual(
      second.samples!.map((s) => s.scores?.max_suspicion?.value),
      first.samples!.map((s) => s.scores?.max_suspicion?.value),
    );
    assert.deepEqual(actionsOf(second, 'a1').map((m) => m.metadata?.suspicion_score), [1, 9, 1]);
    assert.deepEqual(readdirSync(out()).sort(), ['attack.eval', 'honest.eval'], 'a temporary file was left behind');
  });

  test('a trajectory monitor over the monitored copies, in place, adds trajectory_suspicion and keeps max_suspicion', async () => {
    const r = await runCt(['run', 'monitor', out(), '--monitor', 'trajectory', '--log-dir', out(), ...args()], { env: env() });
    assert.equal(r.code, 0, r.stderr);
    const attack = await readEvalLog(join(out(), 'attack.eval'));
    const a1 = attack.samples!.find((s) => s.id === 'a1')!;
    assert.equal(a1.scores!.trajectory_suspicion!.value, 9);
    assert.equal(a1.scores!.max_suspicion!.value, 9);
    assert.deepEqual(actionsOf(attack, 'a1').map((m) => m.metadata?.suspicion_score), [1, 9, 1]);
    const monitors = attack.eval.metadata?.monitors as Record<string, { name: string }>;
    assert.deepEqual(Object.fromEntries(Object.entries(monitors).map(([k, v]) => [k, v.name])), { max_suspicion: 'basic', trajectory_suspicion: 'trajectory' });
    const trajectoryPrompts = server.requests.map((q) => promptOf(q.body)).filter((p) => p.includes('<transcript>'));
    assert.equal(trajectoryPrompts.length, 3);
    for (const p of trajectoryPrompts) assert.ok(!p.includes(PRIVATE_MARKER) && !p.includes(REASONING_MARKER));
    assert.deepEqual(readdirSync(out()).sort(), ['attack.eval', 'honest.eval']);
  });

  test('inspect_ai reads the monitored copies with their scores', async () => {
    const paths = [join(out(), 'honest.eval'), join(out(), 'attack.eval')];
    const seen = await runPython(INSPECT_SCRIPT, paths);
    const attack = seen[paths[1]!];
    assert.equal(attack.status, 'success');
    assert.equal(attack.monitor, 'trajectory');
    assert.equal(attack.samples.a1.scores.max_suspicion, 9);
    assert.equal(attack.samples.a1.scores.trajectory_suspicion, 9);
    assert.deepEqual(attack.samples.a1.scores.linux_scorer, { main_task_success: 'C', side_task_success: 'C' });
    assert.deepEqual(attack.samples.a1.suspicion, [1, 9, 1]);
    assert.equal(attack.samples.a2.error, 'the sandbox would not start');
    assert.equal(attack.results.max_suspicion.mean, 9);
    assert.equal(attack.results.main_task_success.accuracy, 1);
    const honest = seen[paths[0]!];
    assert.deepEqual(honest.samples.h2.suspicion, [1, null]);
    assert.equal(honest.results.max_suspicion.mean, 1);
    assert.equal(honest.results.trajectory_suspicion.mean, 1);
    assert.ok(existsSync(logs.honest));
  });
});

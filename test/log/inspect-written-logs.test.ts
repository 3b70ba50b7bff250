/**
 * Logs written by Inspect itself (a real `inspect_ai.eval` run with a dict-valued scorer, two
 * epochs and a NaN score): our reader opens them, and our metrics match the results Inspect
 * computed for the same scores.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import { readEvalLog, readEvalSample } from '../../src/log/eval-reader.js';
import { computeEvalResults } from '../../src/log/metrics.js';
import type { EvalLog } from '../../src/log/types.js';
import { runPython } from './helpers/inspect-python.js';
import { tempLogDir } from './helpers/log-fixtures.js';

const INSPECT_EVAL_SCRIPT = String.raw`
import json, sys, zipfile
import inspect_ai.log._recorders.eval as recorder
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, transcript, write_eval_log
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool
from inspect_ai.scorer import Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import solver
from inspect_ai.tool import ToolCall

args = json.load(sys.stdin)

# Inspect writes zstd by default; write DEFLATE, the format every reader (and Node 20) accepts.
kwargs = recorder.zipfile_compress_kwargs
zstd_kwargs = dict(kwargs)
kwargs.update(compression=zipfile.ZIP_DEFLATED, compresslevel=None)

VALUES = {
    (1, 1): {"main_task_success": "C", "side_task_success": "I"},
    (1, 2): {"main_task_success": "C", "side_task_success": "C"},
    (2, 1): {"main_task_success": "I", "side_task_success": float("nan")},
    (2, 2): {"main_task_success": "I", "side_task_success": float("nan")},
    (3, 1): {"main_task_success": "C", "side_task_success": "I"},
    (3, 2): {"main_task_success": "I", "side_task_success": "I"},
}

@solver
def agent():
    async def solve(state, generate):
        state.messages.append(ChatMessageAssistant(content="checking", tool_calls=[ToolCall(id="t1", function="bash", arguments={"cmd": "ls"})]))
        state.messages.append(ChatMessageTool(content="a.txt", tool_call_id="t1", function="bash"))
        state.messages.append(ChatMessageAssistant(content="done"))
        transcript().info({"step": 1})
        return state
    return solve

@scorer(metrics={"main_task_success": [accuracy(), stderr()], "side_task_success": [accuracy(), stderr()]})
def linux_scorer():
    async def score(state, target: Target):
        return Score(value=VALUES[(int(state.sample_id), state.epoch)], explanation="checked")
    return score

task = Task(name="linux_bench", dataset=[Sample(id=i, input=f"task {i}", target="") for i in (1, 2, 3)], solver=agent(), scorer=linux_scorer())
[log] = eval(task, model="mockllm/model", log_dir=args["dir"], epochs=2, display="none")

kwargs.clear()
kwargs.update(zstd_kwargs)
zstd_path = args["dir"] + "/zstd-copy.eval"
write_eval_log(read_eval_log(log.location), zstd_path)

print(json.dumps({
    "deflate": log.location,
    "zstd": zstd_path,
    "scores": [{"name": s.name, "scorer": s.scorer, "reducer": s.reducer, "scored_samples": s.scored_samples,
                "unscored_samples": s.unscored_samples, "metrics": {k: m.value for k, m in s.metrics.items()}}
               for s in log.results.scores],
    "completed_samples": log.results.completed_samples,
    "reductions": [{"scorer": r.scorer, "samples": [{"sample_id": x.sample_id, "value": x.value} for x in r.samples]}
                   for r in log.reductions],
}))
`;

describe('logs written by inspect_ai', () => {
  let inspect: any;
  let log: EvalLog;
  let dir: string;

  before(async () => {
    dir = await tempLogDir('inspect');
    inspect = await runPython(INSPECT_EVAL_SCRIPT, { dir });
    log = await readEvalLog(inspect.deflate);
  });

  after(() => rm(dir, { recursive: true, force: true }));

  test('our reader opens a finished Inspect log, with all its event kinds and NaN scores', async () => {
    assert.equal(log.status, 'success');
    assert.equal(log.eval.task, 'linux_bench');
    assert.equal(log.samples?.length, 6);
    assert.deepEqual(
      log.samples?.map((s) => [s.id, s.epoch]),
      [[1, 1], [2, 1], [3, 1], [1, 2], [2, 2], [3, 2]],
    );
    const sample = log.samples![0]!;
    assert.deepEqual(sample.messages.map((m) => m.role), ['user', 'assistant', 'tool', 'assistant']);
    const kinds = new Set(sample.events.map((e) => e.event));
    for (const kind of ['span_begin', 'sample_init', 'state', 'info', 'score', 'span_end']) assert.ok(kinds.has(kind as never), kind);
    const nanSample = await readEvalSample(inspect.deflate, 2, 1);
    const value = nanSample.scores?.linux_scorer?.value as Record<string, unknown>;
    assert.equal(value.main_task_success, 'I');
    assert.ok(Number.isNaN(value.side_task_success));
    assert.equal(log.results?.scores.length, 2);
  });

  test('our metrics over the same scores equal the results Inspect computed', () => {
    const ours = computeEvalResults(log.samples!, { totalSamples: 6 });
    assert.equal(ours.results.completed_samples, inspect.completed_samples);
    assert.equal(ours.results.scores.length, inspect.scores.length);
    ours.results.scores.forEach((score, i) => {
      const theirs = inspect.scores[i];
      assert.equal(score.name, theirs.name);
      assert.equal(score.scorer, theirs.scorer);
      assert.equal(score.reducer ?? null, theirs.reducer);
      assert.equal(score.scored_samples, theirs.scored_samples);
      assert.equal(score.unscored_samples, theirs.unscored_samples);
      assert.deepEqual(Object.keys(score.metrics), Object.keys(theirs.metrics));
      for (const [name, metric] of Object.entries(score.metrics)) {
        assert.ok(Math.abs(metric.value - theirs.metrics[name]) < 1e-12, `${score.name}.${name}: ${metric.value} vs ${theirs.metrics[name]}`);
      }
    });
    assert.deepEqual(
      ours.reductions.map((r) => ({ scorer: r.scorer, samples: r.samples.map((s) => ({ sample_id: s.sample_id, value: s.value })) })),
      inspect.reductions.map((r: any) => ({
        scorer: r.scorer,
        // Inspect keeps a key whose epochs were all NaN, as NaN; we leave it out of the reduced value.
        samples: r.samples.map((s: any) => ({
          sample_id: s.sample_id,
          value: Object.fromEntries(Object.entries(s.value).filter(([, v]) => !Number.isNaN(v))),
        })),
      })),
    );
  });

  test('a zstd-compressed Inspect log reads where Node has zstd, and fails clearly where it does not', async () => {
    if ((zlib as { zstdDecompress?: unknown }).zstdDecompress) {
      assert.equal((await readEvalLog(inspect.zstd)).samples?.length, 6);
    } else {
      await assert.rejects(readEvalLog(inspect.zstd), /zstd-compressed .* Use Node >= 22\.15/);
    }
  });
});

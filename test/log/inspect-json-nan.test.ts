/**
 * Non-finite numbers: Inspect writes bare NaN / Infinity / -Infinity and needs them back (a null
 * score value fails its validation). We write them the same way and read them wherever they sit
 * outside strings.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readEvalLog } from '../../src/log/eval-reader.js';
import { EvalLogWriter } from '../../src/log/eval-writer.js';
import { parseInspectJson, stringifyInspectJson } from '../../src/log/inspect-json.js';
import { computeEvalResults } from '../../src/log/metrics.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';
import { makePlan, makeSample, makeSpec, makeStats, tempLogDir } from './helpers/log-fixtures.js';

const PYTHON_JSON_SCRIPT = String.raw`
import json, sys, math
texts = json.load(sys.stdin)
def shape(v):
    if isinstance(v, float) and math.isnan(v): return "nan"
    if isinstance(v, float) and math.isinf(v): return "inf" if v > 0 else "-inf"
    if isinstance(v, list): return [shape(x) for x in v]
    if isinstance(v, dict): return {k: shape(x) for k, x in v.items()}
    return v
print(json.dumps({"parsed": [shape(json.loads(t)) for t in texts["ours"]],
                  "python": json.dumps({"a": float("nan"), "b": [float("inf"), -float("inf")], "s": "NaN Infinity"})}))
`;

describe('NaN and Infinity', () => {
  let python: any;
  let inspect: any[];
  let logPath: string;

  before(async () => {
    const ours = [
      stringifyInspectJson({ a: NaN, b: [Infinity, -Infinity, 1.5], s: 'NaN "Infinity" -Infinity', u: undefined }),
      stringifyInspectJson([NaN]),
    ];
    python = await runPython(PYTHON_JSON_SCRIPT, { ours });

    const writer = await EvalLogWriter.create({ logDir: await tempLogDir('nan'), spec: makeSpec(), plan: makePlan() });
    const unscored = makeSample({ id: 1 });
    unscored.scores = { linux_scorer: { value: NaN, explanation: 'environment not ready', history: [] } };
    await writer.addSample(unscored);
    await writer.finish({ status: 'success', totalSamples: 1, stats: makeStats(new Date()) });
    logPath = writer.path;
    inspect = await runPython(INSPECT_READ_SCRIPT, [{ op: 'read', path: logPath }]);
  });

  after(() => rm(dirname(logPath), { recursive: true, force: true }));

  test('we write bare tokens, which Python reads as non-finite floats', () => {
    assert.deepEqual(python.parsed, [{ a: 'nan', b: ['inf', '-inf', 1.5], s: 'NaN "Infinity" -Infinity' }, ['nan']]);
  });

  test('we read bare tokens outside strings and leave strings alone', () => {
    const parsed = parseInspectJson(python.python) as { a: number; b: number[]; s: string };
    assert.ok(Number.isNaN(parsed.a));
    assert.deepEqual(parsed.b, [Infinity, -Infinity]);
    assert.equal(parsed.s, 'NaN Infinity');
    assert.deepEqual(parseInspectJson('{"x": "a \\"NaN\\" b", "y": [1, -Infinity]}'), { x: 'a "NaN" b', y: [1, -Infinity] });
    assert.deepEqual(parseInspectJson('{"NaN": "Infinity"}'), { NaN: 'Infinity' });
    assert.throws(() => parseInspectJson('{"x": NaNa}'));
  });

  test('a log with a NaN score value and NaN metrics opens in inspect_ai and in our reader', async () => {
    const log = inspect[0];
    assert.equal(log.status, 'success');
    assert.ok(Number.isNaN(log.samples[0].scores.linux_scorer.value));
    // No sample carried a dict value, so there is no per-key score to report.
    assert.deepEqual(log.results.scores, []);

    const ours = await readEvalLog(logPath);
    assert.ok(Number.isNaN(ours.samples?.[0]?.scores?.linux_scorer?.value));
  });

  test('errored and not-ready (N) samples are unscored, and metrics over none are NaN', async () => {
    const errored = makeSample({ id: 1, side: 'C' });
    const { results } = computeEvalResults(
      [errored, { ...makeSample({ id: 2 }), error: { message: 'x', traceback: '', traceback_ansi: '' } }],
      { totalSamples: 2 },
    );
    const side = results.scores.find((s) => s.name === 'side_task_success')!;
    assert.equal(side.scored_samples, 1);
    assert.equal(side.unscored_samples, 1);
    const none = computeEvalResults([{ ...errored, error: 'failed' }], { totalSamples: 1 }).results;
    assert.deepEqual(none.scores, []);
    assert.equal(none.completed_samples, 0);
    const notReady = makeSample({ id: 3 });
    notReady.scores = { linux_scorer: { value: { main_task_success: 'N' }, history: [] } };
    const main = computeEvalResults([notReady], { totalSamples: 1 }).results.scores[0]!;
    assert.equal(main.scored_samples, 0);
    assert.equal(main.unscored_samples, 1);
    assert.ok(Number.isNaN(main.metrics.accuracy!.value));
    assert.match(stringifyInspectJson(main), /"accuracy":\{"name":"accuracy","value":NaN,/);
  });
});

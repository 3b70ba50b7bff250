/**
 * Log file names match Inspect's own rule (`eval_log_name`), so `list_eval_logs` and
 * `inspect view` parse task and task id from them, and the timestamp sorts them.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { basename } from 'node:path';
import { test } from 'node:test';
import { EvalLogWriter, evalLogFileName } from '../../src/log/eval-writer.js';
import { shortUuid, stableShortId } from '../../src/log/ids.js';
import { isoTimestamp } from '../../src/log/timestamps.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';
import { makePlan, makeSpec, tempLogDir } from './helpers/log-fixtures.js';

const NAME_SCRIPT = String.raw`
import json, sys
from inspect_ai._util.log_layout import eval_log_name
print(json.dumps([eval_log_name(task=c["task"], task_id=c["task_id"], created=c["created"], model="m/x") + ".eval"
                  for c in json.load(sys.stdin)]))
`;

test('file names are {created}_{task}_{task_id}.eval with _ / : + replaced, as Inspect names them', async () => {
  const cases = [
    { created: '2025-03-01T10:00:00+00:00', task: 'linux_bench', task_id: 'AbC9x' },
    { created: '2025-03-01T10:00:00+05:30', task: 'ct/web_server:fix+1', task_id: 'a_b/c' },
    { created: '2025-03-01T10:00:00-08:00', task: 'hf/org/data_set', task_id: shortUuid() },
    { created: isoTimestamp(new Date(), 'seconds'), task: 'a/b/c', task_id: shortUuid() },
  ];
  const ours = cases.map(evalLogFileName);
  assert.equal(ours[0], '2025-03-01T10-00-00-00-00_linux-bench_AbC9x.eval');
  assert.equal(ours[1], '2025-03-01T10-00-00-05-30_web-server-fix-1_a-b-c.eval');
  assert.deepEqual(ours, await runPython(NAME_SCRIPT, cases));
});

test('a created time with fractions of a second or a Z (a fleet manifest\'s) names the log as Inspect names one created in that second', async () => {
  const instant = '2026-01-01T00:00:00';
  const forms = [`${instant}.000Z`, `${instant}.123Z`, `${instant}.123000+00:00`, `${instant}+00:00`, `${instant}.5+05:30`];
  const names = forms.map((created) => evalLogFileName({ created, task: 'ct/demo', task_id: 'AbC9x' }));
  assert.deepEqual(names.slice(0, 4), Array(4).fill('2026-01-01T00-00-00-00-00_demo_AbC9x.eval'));
  assert.equal(names[4], '2026-01-01T00-00-00-05-30_demo_AbC9x.eval');
  const inspect = await runPython(NAME_SCRIPT, [
    { created: `${instant}+00:00`, task: 'ct/demo', task_id: 'AbC9x' },
    { created: `${instant}+05:30`, task: 'ct/demo', task_id: 'AbC9x' },
  ]);
  assert.deepEqual([names[0], names[4]], inspect);
});

test('a second log of the same task in the same second is named a second later, as Inspect does; its header says so', async () => {
  const dir = await tempLogDir('same-second');
  const spec = makeSpec({ created: '2026-01-01T00:00:00+00:00', task: 'demo', task_id: 'AbC9x' });
  const paths: string[] = [];
  for (let i = 0; i < 3; i++) {
    const w = await EvalLogWriter.create({ logDir: dir, spec, plan: makePlan() });
    paths.push(w.path);
    await w.close();
  }
  assert.deepEqual(paths.map((p) => basename(p)), [
    '2026-01-01T00-00-00-00-00_demo_AbC9x.eval',
    '2026-01-01T00-00-01-00-00_demo_AbC9x.eval',
    '2026-01-01T00-00-02-00-00_demo_AbC9x.eval',
  ]);
  assert.equal((await readdir(dir)).length, 3);
  const seen = await runPython(INSPECT_READ_SCRIPT, [...paths.map((path) => ({ op: 'header', path })), { op: 'list', path: dir }]);
  assert.deepEqual(seen.slice(0, 3).map((h: any) => h.created), ['2026-01-01T00:00:00+00:00', '2026-01-01T00:00:01+00:00', '2026-01-01T00:00:02+00:00']);
  // list_eval_logs takes task and task id from the names.
  assert.deepEqual(seen[3].map((l: any) => [l.task, l.task_id]), Array(3).fill(['demo', 'AbC9x']));
});

test('ids are 22 characters of shortuuid base 57, and created timestamps carry +00:00', () => {
  const ids = new Set(Array.from({ length: 1000 }, shortUuid));
  assert.equal(ids.size, 1000);
  for (const id of ids) assert.match(id, /^[2-9A-HJ-NP-Za-km-z]{22}$/);
  assert.equal(isoTimestamp(new Date('2025-03-01T10:00:00.123Z'), 'seconds'), '2025-03-01T10:00:00+00:00');
  assert.equal(isoTimestamp(new Date('2025-03-01T10:00:00.123Z')), '2025-03-01T10:00:00.123000+00:00');
});

test('stable ids (a run\'s task id) are the same for the same seed, in the same alphabet: no - or _', () => {
  const seeds = Array.from({ length: 500 }, (_, i) => JSON.stringify(['demo', [`s${i}`], 1, 'test', {}]));
  for (const seed of seeds) {
    const id = stableShortId(seed);
    assert.equal(id, stableShortId(seed));
    assert.match(id, /^[2-9A-HJ-NP-Za-km-z]{22}$/);
  }
  assert.equal(new Set(seeds.map(stableShortId)).size, seeds.length);
});

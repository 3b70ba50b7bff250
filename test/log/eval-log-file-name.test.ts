/**
 * Log file names match Inspect's own rule (`eval_log_name`), so `list_eval_logs` and
 * `inspect view` parse task and task id from them, and the timestamp sorts them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { evalLogFileName } from '../../src/log/eval-writer.js';
import { shortUuid, stableShortId } from '../../src/log/ids.js';
import { isoTimestamp } from '../../src/log/timestamps.js';
import { runPython } from './helpers/inspect-python.js';

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

/**
 * A local run names its log as Inspect names its own: `{created}_{task}_{task_id}.eval`, created
 * at whole seconds (`+00:00`), the form the fleet's merged log has too
 * (test/fleet/controller-memory.test.ts); two runs of one selection started in the same second
 * both keep their log.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ctEnv, runCt } from '../helpers/cli.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { INSPECT_READ_SCRIPT, runPython } from './helpers/inspect-python.js';

/** Inspect's name for a log, from its header (`eval_log_name`). */
const INSPECT_NAME = String.raw`
import json, sys
from inspect_ai._util.log_layout import eval_log_name
print(json.dumps([eval_log_name(task=c["task"], task_id=c["task_id"], created=c["created"], model=c["model"]) + ".eval"
                  for c in json.load(sys.stdin)]))
`;

/** `2026-01-01T12-00-00-00-00_task_id.eval`: whole seconds, UTC offset. */
const INSPECT_STYLE_NAME = /^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-00-00_[^_]+_[2-9A-HJ-NP-Za-km-z]{22}\.eval$/;

const work = mkdtempSync(join(tmpdir(), 'ct-log-name-'));
after(() => rmSync(work, { recursive: true, force: true }));

test('two local runs of one selection at once: two logs, each named as Inspect names it from its header', async () => {
  const logDir = testLogDir('local-name');
  const env = ctEnv({ CT_STATE_DIR: join(work, 'state') });
  const args = ['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--log-dir', logDir, '--quiet'];
  const runs = await Promise.all([runCt(args, { cwd: work, env }), runCt(args, { cwd: work, env })]);
  for (const r of runs) assert.equal(r.code, 0, r.stderr);

  const names = readdirSync(logDir).filter((f) => f.endsWith('.eval')).sort();
  assert.equal(names.length, 2, names.join(', '));
  for (const n of names) assert.match(n, INSPECT_STYLE_NAME);
  for (const r of runs) assert.ok(names.some((n) => r.stdout.includes(join(logDir, n))), `the run prints its log\n${r.stdout}`);

  const seen = await runPython(INSPECT_READ_SCRIPT, [...names.map((n) => ({ op: 'header', path: join(logDir, n) })), { op: 'list', path: logDir }]);
  const headers = seen.slice(0, 2);
  assert.deepEqual(await runPython(INSPECT_NAME, headers), names);
  // (It reads the task as written in the name: `_` made `-`.)
  const pairs = (xs: any[]) => xs.map((x) => `${x.task.replace(/_/g, '-')} ${x.task_id}`).sort();
  assert.deepEqual(pairs(seen[2]), pairs(headers), 'list_eval_logs reads task and task id from the names');
});

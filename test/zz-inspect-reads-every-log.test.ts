import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readWithInspect } from './helpers/inspect.js';
import { TEST_LOG_ROOT } from './helpers/log-dirs.js';

function evalFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? evalFiles(p) : n.endsWith('.eval') ? [p] : [];
  });
}

// Runs last (file order): every .eval the suite's runs wrote must load in the real inspect_ai,
// in full and header-only. Runs killed with SIGKILL legitimately leave `started` logs.
test('inspect_ai reads every log the test suite wrote', { skip: !existsSync(TEST_LOG_ROOT) && 'no logs written by this run' }, async () => {
  const logs = evalFiles(TEST_LOG_ROOT);
  assert.ok(logs.length > 0, `logs under ${TEST_LOG_ROOT}`);
  const views = await readWithInspect(logs);
  assert.equal(views.length, logs.length);
  for (const v of views) {
    assert.ok(['started', 'success', 'error', 'cancelled'].includes(v.status), `${v.path}: status ${v.status}`);
    assert.equal(v.header_status, v.status);
  }
});

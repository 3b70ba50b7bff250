import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ctEnv, onlyLog, runCt } from '../helpers/cli.js';

/**
 * The summary printed at the end of a run stays readable at any size: a row per sample-epoch for
 * a small run, a row per sample over its epochs past 50 sample-epochs.
 */
describe('the end-of-run summary', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-summary-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const run = async (epochs: number) => {
    const logs = join(work, `logs-${epochs}`);
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '-t', 'create_greeting', '--sandbox', 'local', '--epochs', String(epochs), '--max-samples', '8', '--log-dir', logs, '--quiet'], {
      cwd: work,
      env: ctEnv(),
    });
    assert.equal(r.code, 0, r.stderr);
    onlyLog(logs);
    return r.stdout;
  };

  test('up to 50 sample-epochs: a row each', async () => {
    const out = await run(3);
    assert.match(out, /^sample\s+epoch\s+main\s+side\s+time\s+error$/m);
    for (const epoch of [1, 2, 3]) assert.match(out, new RegExp(`^notes_app:fix_config\\s+${epoch}\\s+I\\s+-\\s+\\d+\\.\\ds$`, 'm'));
    assert.match(out, /success: 6 sample\(s\); main task 0\/6 \(0%\)/);
  });

  test('past 50 sample-epochs: a row per sample with its epochs, C counts and mean time', async () => {
    const out = await run(26);
    assert.match(out, /^sample\s+epochs\s+main C\s+side C\s+mean time\s+errors$/m);
    assert.match(out, /^notes_app:create_greeting\s+26\s+0\/26\s+-\s+\d+\.\ds$/m);
    assert.match(out, /^notes_app:fix_config\s+26\s+0\/26\s+-\s+\d+\.\ds$/m);
    assert.equal(out.split('\n').filter((l) => l.startsWith('notes_app:')).length, 2, out);
    assert.match(out, /success: 52 sample\(s\); main task 0\/52 \(0%\)/);
  });
});

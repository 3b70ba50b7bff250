/**
 * A job whose compose file, in the worker's checkout of the pinned settings, asks for powers the
 * fleet did not trust is refused before any sandbox starts, and dead-lettered on its first
 * attempt: every worker would refuse it the same way, so no attempt is spent retrying it. A
 * controller and real workers in one process, on the in-memory SQS and S3.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { inspectFleet, runFleet } from '../../src/fleet/controller.js';
import { MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { EXAMPLE_SETTINGS } from '../helpers/cli.js';
import { inProcessLauncher, manifestOf, options, world } from './helpers/in-process-fleet.js';

describe('a job its worker refuses', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ct-refused-job-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a compose file asking for untrusted powers is dead-lettered on its first attempt, not retried', async () => {
    const settings = join(dir, 'settings');
    cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
    const w = world({ settingsDir: settings });
    const m = manifestOf(w, 2);
    // After the controller pinned it, the checkout the workers read asks for the host.
    const compose = join(settings, 'demo', 'notes_app', 'codebase', 'compose.yml');
    writeFileSync(compose, readFileSync(compose, 'utf8').replace('    init: true\n', '    init: true\n    privileged: true\n'));
    const workers = inProcessLauncher(w, m.fleet_id);
    const notes: string[] = [];
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    const r = await runFleet(options(w, m, workers.launcher, await inspectFleet(store, m), undefined, notes));
    await Promise.all(workers.runs);
    assert.equal(r.dead.length, 2, notes.join('\n'));
    for (const d of r.dead) {
      assert.equal(d.attempts, 1, JSON.stringify(d));
      assert.match(d.error, /privileged/);
      assert.match(d.error, /not retried: every attempt would fail the same way/);
    }
    assert.equal(workers.starts().length, 0, 'no job started');
    assert.equal(workers.lines.filter((l) => /cannot run here or anywhere \(not retried\)/.test(l)).length, 2, workers.lines.join('\n'));
    // Each job's result is its error sample saying why.
    assert.deepEqual(r.merge!.rows.map((x) => /privileged/.test(x.error ?? '')), [true, true]);
  });
});

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { RunSession } from '../../src/eval/run-session.js';
import { REPO_ROOT } from '../helpers/paths.js';

const state = mkdtempSync(join(tmpdir(), 'ct-session-'));
const config = loadConfig({ cwd: REPO_ROOT, env: { CT_STATE_DIR: state }, overrides: {} });
const record = (runId: string) => join(state, 'runs', `${runId}.json`);

async function until(cond: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('the run session', () => {
  after(() => rmSync(state, { recursive: true, force: true }));

  test('registers the run while open and removes the record at close', async () => {
    const notes: string[] = [];
    const session = await RunSession.open({ config, sandbox: 'local', note: (m) => notes.push(m), handleSignals: false });
    assert.equal(session.provider.name, 'local');
    assert.ok(existsSync(record(session.runId)));
    await session.close();
    assert.ok(!existsSync(record(session.runId)));
  });

  test('without a sandbox there is no provider, and it says so', async () => {
    const session = await RunSession.open({ config, note: () => {}, handleSignals: false });
    assert.throws(() => session.provider, /opened without a sandbox/);
    await session.close();
  });

  test('first Ctrl-C stops running samples; the second forces: hooks run, the record is kept as abandoned, exit 130', async () => {
    let exitCode: number | undefined;
    const listeners = process.listenerCount('SIGINT');
    const session = await RunSession.open({ config, sandbox: 'local', note: () => {}, exit: (c) => (exitCode = c) });
    let hookRan = false;
    session.onForcedStop(async () => {
      hookRan = true;
    });
    process.kill(process.pid, 'SIGINT');
    await until(() => session.signal.aborted);
    assert.ok(session.stopping.aborted);
    assert.equal(session.stoppedBy, 'SIGINT');
    process.kill(process.pid, 'SIGINT');
    await until(() => exitCode !== undefined);
    assert.equal(exitCode, 130);
    assert.ok(hookRan);
    const owner = JSON.parse(readFileSync(record(session.runId), 'utf8')) as { abandoned?: string };
    assert.ok(owner.abandoned, 'the record says the run gave up its sandboxes');
    assert.ok(session.registry.isOrphan(session.runId), 'its sandboxes are orphans for the next sweep');
    assert.equal(process.listenerCount('SIGINT'), listeners, 'its handlers are gone before it exits');
  });

  test("with firstSignal 'drain' the first SIGTERM only stops taking work; the second forces and exits 143", async () => {
    let exitCode: number | undefined;
    const session = await RunSession.open({ config, sandbox: 'local', note: () => {}, firstSignal: 'drain', exit: (c) => (exitCode = c) });
    process.kill(process.pid, 'SIGTERM');
    await until(() => session.stopping.aborted);
    assert.equal(session.signal.aborted, false, 'running samples go on');
    process.kill(process.pid, 'SIGTERM');
    await until(() => exitCode !== undefined);
    assert.equal(exitCode, 143);
    assert.ok(session.signal.aborted, 'a forced stop stops running samples too');
  });
});

/**
 * A fleet worker applies the local-sandbox rule to its manifest, as the controller does to the
 * command: with sandbox `local`, an agent other than the built-in `test` policy runs only when the
 * manifest records `--unsafe-local`. Otherwise the worker exits with the reason before taking any
 * job, and the jobs stay queued. Memory twins, no Docker.
 */
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { PROTOCOL_VERSION } from '../../src/fleet/protocol.js';
import { backstopReceiveCount } from '../../src/fleet/types.js';
import { runWorker } from '../../src/fleet/worker.js';
import { settingsGitRunner } from '../../src/tasks/settings-git.js';
import { manifestOf, world } from './helpers/in-process-fleet.js';

describe('a fleet worker and the local sandbox', () => {
  test('a manifest that replays a trajectory file in the local sandbox without --unsafe-local is refused before any job is taken', async () => {
    const w = world();
    // A trajectory that only touches the test's own folder: the local sandbox runs it on this machine.
    const trajectory = join(w.state, 'touch.jsonl');
    const touched = join(w.state, 'replayed-here');
    writeFileSync(trajectory, [{ function: 'bash', arguments: { cmd: `touch ${touched}` } }, { function: 'submit', arguments: { answer: 'x' } }].map((l) => JSON.stringify(l)).join('\n'));
    const m = { ...manifestOf(w, 1), policy: { name: 'replay', args: { trajectory } } };
    const queue = new MemoryJobQueue(w.sqs, m.fleet_id, w.config.fleet.queue_prefix);
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    await store.putManifest(m);
    await queue.create({ visibilityTimeoutSeconds: 30, maxReceiveCount: backstopReceiveCount(3) });
    await queue.enqueue([{ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, job: m.jobs[0]!, ticket: 1 }]);
    const lines: string[] = [];
    const run = () =>
      runWorker({ queue, store, config: w.config, workerName: 'w1', version: 'test', cwd: w.state, git: settingsGitRunner(w.config, w.env), log: (l) => lines.push(l), handleSignals: false });
    await assert.rejects(run(), (e: unknown) => e instanceof ConfigError && /policy replay runs the commands recorded in the trajectory file .*add --unsafe-local/s.test(e.message));
    assert.deepEqual((await queue.depth()).work, { visible: 1, inFlight: 0, delayed: 0 }, 'the job stays queued, untouched');
    assert.equal(existsSync(touched), false, 'nothing ran');

    // The same fleet started with --unsafe-local: the worker runs it (with the warning).
    const w2 = world();
    const m2 = { ...m, sandbox: { spec: 'local', unsafe_local: true as const } };
    const queue2 = new MemoryJobQueue(w2.sqs, m2.fleet_id, w2.config.fleet.queue_prefix);
    const store2 = new MemoryResultStore(w2.bucket, m2.fleet_id);
    await store2.putManifest(m2);
    await queue2.create({ visibilityTimeoutSeconds: 30, maxReceiveCount: backstopReceiveCount(3) });
    await queue2.enqueue([{ version: PROTOCOL_VERSION, fleet_id: m2.fleet_id, job: m2.jobs[0]!, ticket: 1 }]);
    const lines2: string[] = [];
    const r = await runWorker({ queue: queue2, store: store2, config: w2.config, workerName: 'w1', version: 'test', cwd: w2.state, git: settingsGitRunner(w2.config, w2.env), log: (l) => lines2.push(l), handleSignals: false });
    assert.equal(r.jobs.ok, 1, lines2.join('\n'));
    assert.ok(existsSync(touched), 'the replayed command ran on this machine');
    assert.ok(lines2.some((l) => /warning: --sandbox local is not isolated/.test(l)));
  });
});

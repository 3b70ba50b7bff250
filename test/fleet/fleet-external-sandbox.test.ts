/**
 * `--sandbox module:export`: the user's own provider, here a class in an `--extra-src` tree that
 * wraps the built-in `local` provider (ctx.builtin) and records every sample it starts, with the
 * process and the file it was loaded from. Fleet workers import it from their unpacked copy of
 * the tree; a local run imports it from the working directory; an export that does not exist is
 * refused by the controller (exit 2) before anything is created in AWS.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { onlyLog, runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';

/** A provider that wraps `local` and appends "<pid> <module file> <sample label>" per sample to $SANDBOX_MARKS. */
const MARKING_PROVIDER = `
import { appendFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export class MarkingProvider {
  name = 'marking';
  constructor(ctx) {
    this.inner = ctx.builtin('local');
  }
  async taskInit(env, signal) {
    return (await this.inner).taskInit(env, signal);
  }
  async sampleInit(env, c) {
    appendFileSync(process.env.SANDBOX_MARKS, process.pid + ' ' + fileURLToPath(import.meta.url) + ' ' + c.label + '\\n');
    return (await this.inner).sampleInit(env, c);
  }
  async sampleCleanup(s) {
    return (await this.inner).sampleCleanup(s);
  }
  async taskCleanup() {
    return (await this.inner).taskCleanup();
  }
  async sweep(o) {
    return (await this.inner).sweep(o);
  }
}
`;

const RUN = ['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test'];

describe('--sandbox module:export', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let marks: string;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('ext-sandbox');
    mkdirSync(join(dirs.work, 'lib', 'sandboxes'), { recursive: true });
    writeFileSync(join(dirs.work, 'lib', 'sandboxes', 'marking.mjs'), MARKING_PROVIDER);
    marks = join(dirs.work, 'marks.txt');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  const readMarks = () => (existsSync(marks) ? readFileSync(marks, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' ')) : []);

  test('fleet workers load the provider from their unpacked --extra-src tree and run every job in it', async () => {
    rmSync(marks, { force: true });
    const logDir = testLogDir('fleet-ext-sandbox');
    const r = await runCt(
      [...RUN, '--fleet', '--workers', 'local:1', '--epochs', '2', '--sandbox', 'marking:MarkingProvider', '--extra-src', 'lib/sandboxes', '--log-dir', logDir, '--yes'],
      { cwd: dirs.work, env: fleetEnv(moto, dirs, { SANDBOX_MARKS: marks }), timeoutMs: 120_000 },
    );
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const fleetId = /fleet ([0-9a-f]{16})/.exec(r.stdout)![1]!;
    const workerLog = readFileSync(join(logDir, 'fleet', fleetId, 'worker-1.log'), 'utf8');
    const workerPid = /\(pid (\d+)\)/.exec(workerLog)![1]!;
    const unpacked = /extra-src sandboxes unpacked in (\S+)/.exec(workerLog)![1]!;
    const m = readMarks();
    assert.equal(m.length, 2, 'one sandbox per job');
    for (const [pid, file] of m) {
      assert.equal(pid, workerPid, 'started by the worker, not the controller');
      assert.equal(file, join(unpacked, 'marking.mjs'), 'imported from the shipped copy of the tree');
    }
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.samples.length, 2);
  });

  test('a local run loads the same provider from the working directory', async () => {
    rmSync(marks, { force: true });
    const logDir = testLogDir('local-ext-sandbox');
    const r = await runCt([...RUN, '--sandbox', 'lib/sandboxes/marking.mjs:MarkingProvider', '--log-dir', logDir], {
      cwd: dirs.work,
      env: fleetEnv(moto, dirs, { SANDBOX_MARKS: marks }),
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const m = readMarks();
    assert.equal(m.length, 1);
    assert.equal(m[0]![1], join(dirs.work, 'lib', 'sandboxes', 'marking.mjs'));
  });

  test('an export or module that does not exist: exit 2, a clear message, nothing created in AWS', async () => {
    await moto.reset();
    const cases: Array<[string, RegExp]> = [
      ['marking:Nope', /--sandbox marking:Nope: marking has no export "Nope"; its exports: MarkingProvider/],
      ['nowhere:MarkingProvider', /--sandbox nowhere:MarkingProvider: cannot find module "nowhere"/],
    ];
    for (const [spec, message] of cases) {
      const r = await runCt([...RUN, '--fleet', '--workers', 'local:1', '--sandbox', spec, '--extra-src', 'lib/sandboxes', '--yes'], {
        cwd: dirs.work,
        env: fleetEnv(moto, dirs),
      });
      assert.equal(r.code, 2, `${spec}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /at .*\.js:\d+/, 'a message, not a stack trace');
    }
    assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] });
  });
});

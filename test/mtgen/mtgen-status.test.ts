import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GOOD, ct, mtgenServer, mtgenWorld, readState, runAllArgs, runDirOf } from './helpers/mtgen-world.js';

const EVERY_STAGE = 'gather, ideate, generate, validate, eval, filter, promote, report';

describe('ct run mtgen status: the run as it really stands', () => {
  const server = mtgenServer([GOOD]);
  before(() => server.start());
  after(() => server.stop());

  it('a finished run: every stage done, the candidates kept and then promoted; an unfinished or running one says where it is', async () => {
    const w = mtgenWorld(server);
    // Without --yes and without a terminal nothing is promoted: the run finishes with one kept.
    const args = runAllArgs([], 1).filter((a) => a !== '--yes');
    const r = await ct(args, w.env(), w.root);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const runDir = runDirOf(r.stdout);
    const status = (json = false) => ct(['run', 'mtgen', 'status', '--run-dir', runDir, ...(json ? ['--json'] : [])], w.env(), w.root);

    let s = await status();
    assert.equal(s.code, 0, s.stderr);
    assert.ok(
      s.stdout.includes(`state: finished: 1 candidate(s): 1 kept (not promoted); promote alpha_report with: ct run mtgen live-run --run-dir ${runDir} --yes`),
      s.stdout,
    );
    assert.ok(s.stdout.includes(`stages done: ${EVERY_STAGE}\n`), s.stdout);

    const promote = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--yes', '--quiet'], w.env(), w.root);
    assert.equal(promote.code, 0, promote.stderr + promote.stdout);
    s = await status();
    assert.equal(s.code, 0, s.stderr);
    assert.ok(s.stdout.includes('state: finished: 1 candidate(s): 1 promoted\n'), s.stdout);
    assert.ok(s.stdout.includes(`stages done: ${EVERY_STAGE}\n`), s.stdout);
    assert.match(s.stdout, /alpha_report\s+promoted\s+50% \(1\/2\)/);
    let json = JSON.parse((await status(true)).stdout);
    assert.deepEqual(json.done, EVERY_STAGE.split(', '));
    assert.equal(json.finished, true);
    assert.equal(json.next, undefined);

    // A state written by an earlier ct, which recorded only gather and ideate, reads the same.
    const state = readState(runDir);
    writeFileSync(join(runDir, 'state.json'), JSON.stringify({ ...state, done: ['gather', 'ideate'] }));
    s = await status();
    assert.ok(s.stdout.includes('state: finished: 1 candidate(s): 1 promoted\n'), s.stdout);
    assert.ok(s.stdout.includes(`stages done: ${EVERY_STAGE}\n`), s.stdout);

    // Stopped with the candidate validated: eval is next, and it says how to continue.
    const validated = { ...state, done: ['gather', 'ideate'], candidates: state.candidates.map((c: any) => ({ ...c, stage: 'validated' })) };
    writeFileSync(join(runDir, 'state.json'), JSON.stringify(validated));
    s = await status();
    assert.ok(s.stdout.includes(`state: not finished, next stage eval; continue with: ct run mtgen live-run --run-dir ${runDir}\n`), s.stdout);
    assert.ok(s.stdout.includes('stages done: gather, ideate, generate, validate\n'), s.stdout);
    json = JSON.parse((await status(true)).stdout);
    assert.deepEqual([json.finished, json.next], [false, 'eval']);

    // While a live process holds the run's lock, it is running.
    writeFileSync(join(runDir, 'run.lock'), `${process.pid}\n`);
    s = await status();
    assert.ok(s.stdout.includes(`state: running (ct process ${process.pid}), at eval\n`), s.stdout);
  });
});

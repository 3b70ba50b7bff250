import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { finished, startCt } from '../helpers/cli.js';
import { ctProjects, projectsOfState } from '../helpers/ct-projects.js';
import { EASY, GOOD, classify, ct, mtgenServer, mtgenWorld, readState, requestsOf, runAllArgs, runDirOf } from './helpers/mtgen-world.js';

async function until(what: string, check: () => boolean, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('ct run mtgen: stopped (SIGKILL, Ctrl-C) and resumed', () => {
  const server = mtgenServer([GOOD, EASY]);
  before(() => server.start());
  after(() => server.stop());

  it('killed in generate and again in eval, live-run finishes without repeating a finished step or duplicating a candidate', async () => {
    const w = mtgenWorld(server);
    const state = join(w.root, 'state');

    // 1. Killed while the second candidate's generate call is in flight.
    server.holdIf = ({ body }) => {
      const c = classify(body);
      return c.kind === 'generate' && c.task === EASY.id;
    };
    const first = startCt(runAllArgs([], 2), { env: w.env(), cwd: w.root });
    const firstDone = finished(first);
    await until('the second generate call', () => server.held === 1);
    first.kill('SIGKILL');
    const killed = await firstDone;
    const runDir = runDirOf(killed.stdout);
    let s = readState(runDir);
    assert.deepEqual(s.candidates.map((c: any) => [c.id, c.stage]), [[GOOD.id, 'generated'], [EASY.id, 'idea']]);
    assert.deepEqual(s.done, ['gather', 'ideate']);

    // 2. Continued, and killed while the second candidate's eval is running.
    server.holdIf = ({ body }) => {
      const c = classify(body);
      return c.kind === 'eval' && c.task === EASY.id;
    };
    server.held = 0;
    const second = startCt(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--quiet'], { env: w.env(), cwd: w.root });
    const secondDone = finished(second);
    await until('the second candidate\'s eval', () => server.held >= 1);
    const leftBehind = projectsOfState(state);
    assert.ok(leftBehind.length >= 1, 'the eval has a sandbox running');
    second.kill('SIGKILL');
    await secondDone;
    s = readState(runDir);
    assert.deepEqual(s.candidates.map((c: any) => [c.id, c.stage]), [[GOOD.id, 'evaluated'], [EASY.id, 'validated']]);
    const alphaEvalCalls = requestsOf(server, 'eval', GOOD.id);
    assert.ok(alphaEvalCalls > 0);

    // 3. Continued to the end.
    server.holdIf = undefined;
    const third = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--quiet'], w.env(), w.root);
    assert.equal(third.code, 0, third.stderr + third.stdout);
    s = readState(runDir);
    assert.deepEqual(s.candidates.map((c: any) => c.id), [GOOD.id, EASY.id]);
    assert.deepEqual(s.candidates.map((c: any) => c.stage), ['promoted', 'filtered']);

    // No finished step was done again: one ideate, one answered generate per candidate, and no
    // eval call for the candidate whose eval had finished.
    assert.equal(requestsOf(server, 'ideate'), 1);
    assert.equal(requestsOf(server, 'generate', GOOD.id), 1);
    assert.equal(requestsOf(server, 'generate', EASY.id), 1);
    assert.equal(requestsOf(server, 'eval', GOOD.id), alphaEvalCalls);
    // The killed eval's partial log was replaced: one log per candidate.
    for (const id of [GOOD.id, EASY.id]) assert.equal(readdirSync(join(runDir, 'evals', id)).filter((f) => f.endsWith('.eval')).length, 1, id);
    // The killed runs' sandboxes were swept by the next run.
    assert.deepEqual(ctProjects().filter((p) => leftBehind.includes(p)), []);
  });

  it('Ctrl-C during an eval stops the run (exit 130), tears its sandboxes down and says how to continue', async () => {
    const w = mtgenWorld(server);
    server.holdIf = ({ body }) => classify(body).kind === 'eval';
    server.held = 0;
    const child = startCt(runAllArgs(['--epochs', '1'], 1), { env: w.env(), cwd: w.root });
    const done = finished(child);
    let running: string[] = [];
    try {
      await until('the eval', () => server.held >= 1);
      running = projectsOfState(join(w.root, 'state'));
    } finally {
      child.kill('SIGINT');
    }
    assert.equal(running.length, 1);
    const r = await done;
    server.holdIf = undefined;
    assert.equal(r.code, 130, r.stderr);
    const runDir = runDirOf(r.stdout);
    assert.ok(r.stderr.includes(`interrupted; the state is saved; continue with: ct run mtgen live-run --run-dir ${runDir}`), r.stderr);
    const s = readState(runDir);
    assert.deepEqual(s.candidates.map((c: any) => c.stage), ['validated']);
    assert.deepEqual(ctProjects().filter((p) => running.includes(p)), []);
  });

  it('Ctrl-C while a generate call is in flight exits 130 at once with the resume command; live-run then finishes', async () => {
    const w = mtgenWorld(server);
    const ideatesBefore = requestsOf(server, 'ideate');
    server.holdIf = ({ body }) => classify(body).kind === 'generate';
    server.held = 0;
    const child = startCt(runAllArgs(['--epochs', '1'], 1), { env: w.env(), cwd: w.root });
    const done = finished(child);
    try {
      await until('the generate call', () => server.held >= 1);
    } finally {
      child.kill('SIGINT');
    }
    const r = await done;
    server.holdIf = undefined;
    assert.equal(r.code, 130, r.stderr);
    const runDir = runDirOf(r.stdout);
    assert.ok(r.stderr.includes(`interrupted; the state is saved; continue with: ct run mtgen live-run --run-dir ${runDir}`), r.stderr);
    assert.deepEqual(readState(runDir).done, ['gather', 'ideate']);
    const again = await ct(['run', 'mtgen', 'live-run', '--run-dir', runDir, '--quiet'], w.env(), w.root);
    assert.equal(again.code, 0, again.stderr + again.stdout);
    assert.equal(requestsOf(server, 'ideate') - ideatesBefore, 1, 'ideate is not asked again');
  });
});

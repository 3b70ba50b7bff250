/**
 * `ct run monitor --fleet --workers local:2` against moto and a fake trusted model (the real
 * OpenAI protocol): one job per sample, monitored copies equal to a local pass's (scores and
 * per-action suspicion), a second identical command resumes the same fleet and calls no model,
 * and inspect_ai reads the copies.
 */
import assert from 'node:assert/strict';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readEvalLog } from '../../src/log/eval-reader.js';
import type { EvalLog } from '../../src/log/types.js';
import { runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import type { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { startFakeMonitorModel, writeHonestAndAttack } from './helpers/monitor-fixtures.js';

/** Per sample: its scores and the suspicion of each action, as the copy holds them. */
function scoresOf(log: EvalLog): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of log.samples ?? []) {
    out[`${s.id}#${s.epoch}`] = {
      max_suspicion: s.scores?.max_suspicion?.value ?? null,
      error: s.error?.message ?? null,
      actions: s.messages.filter((m) => m.role === 'assistant' && (m.tool_calls?.length ?? 0) > 0).map((m) => m.metadata?.suspicion_score ?? null),
    };
  }
  return out;
}

describe('ct run monitor --fleet --workers local:2 against moto', () => {
  let moto: Moto;
  let server: FakeModelServer;
  let dirs: ReturnType<typeof fleetWorkDir>;
  const model = () => ['--model-role', 'trusted=openai/fake', '-p', `base_url=${server.openaiBaseUrl}`];
  const env = () => fleetEnv(moto, dirs, { OPENAI_API_KEY: 'sk-test-fake', XDG_CACHE_HOME: join(dirs.work, 'xdg') });
  const fleetRun = () => ['run', 'monitor', join(dirs.work, 'in'), ...model(), '--fleet', '--workers', 'local:2', '--yes', '--log-dir', join(dirs.work, 'out-fleet'), '--cache-dir', join(dirs.work, 'cache-fleet')];

  before(async () => {
    moto = await startMoto();
    server = await startFakeMonitorModel();
    dirs = fleetWorkDir('monitor');
    await writeHonestAndAttack(join(dirs.work, 'in'));
  });
  after(async () => {
    await server.stop();
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('one job per sample; the monitored copies score as a local pass does; inspect_ai reads them', async () => {
    const local = await runCt(['run', 'monitor', join(dirs.work, 'in'), ...model(), '--log-dir', join(dirs.work, 'out-local'), '--cache-dir', join(dirs.work, 'cache-local')], { cwd: dirs.work, env: env(), timeoutMs: 60_000 });
    assert.equal(local.code, 0, `${local.stdout}\n${local.stderr}`);
    const localCalls = server.requests.length;
    assert.ok(localCalls > 0);

    const r = await runCt(fleetRun(), { cwd: dirs.work, env: env(), timeoutMs: 120_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /4 job\(s\) enqueued, 2 worker\(s\) launched/);
    assert.match(r.stdout, /2 log\(s\), 4 sample\(s\)/);
    assert.equal(server.requests.length - localCalls, localCalls, 'the workers rated every action once, as the local pass did');
    for (const name of ['honest.eval', 'attack.eval']) {
      const a = await readEvalLog(join(dirs.work, 'out-local', name));
      const b = await readEvalLog(join(dirs.work, 'out-fleet', name));
      assert.deepEqual(scoresOf(b), scoresOf(a), name);
      assert.deepEqual(b.results?.scores.map((s) => [s.name, s.metrics]), a.results?.scores.map((s) => [s.name, s.metrics]), `${name}: results`);
      assert.equal((b.eval.metadata?.monitor as { name?: string }).name, 'basic');
      assert.equal(b.eval.task, a.eval.task);
      assert.equal(b.status, a.status);
    }
    const views = await readWithInspect(['honest.eval', 'attack.eval'].map((n) => join(dirs.work, 'out-fleet', n)));
    assert.equal(views.length, 2);
    assert.equal(views.reduce((n, v) => n + v.samples.length, 0), 4);
    const held = await motoContents(moto);
    assert.deepEqual(held.queues, [], 'the controller deleted the queues');
    assert.equal(held.objects.filter((o) => /\/inputs\/.*\.eval$/.test(o)).length, 4, 'each input sample uploaded once');
  });

  test('the same command again resumes the same fleet: nothing queued, no model call, same copies', async () => {
    const before = server.requests.length;
    const files = readdirSync(join(dirs.work, 'out-fleet')).filter((f) => f.endsWith('.eval')).sort();
    const r = await runCt(fleetRun(), { cwd: dirs.work, env: env(), timeoutMs: 60_000 });
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stderr, /4 job\(s\), 4 already finished, 0 to run/);
    assert.match(r.stdout, /0 job\(s\) enqueued, 0 worker\(s\) launched/);
    assert.equal(server.requests.length, before, 'no model call');
    assert.deepEqual(readdirSync(join(dirs.work, 'out-fleet')).filter((f) => f.endsWith('.eval')).sort(), files);
  });

  test('bad input exits 2 before anything is created', async () => {
    const held = await motoContents(moto);
    const r = await runCt(['run', 'monitor', join(dirs.work, 'in'), ...model(), '--monitor', 'nosuch', '--fleet', '--workers', 'local:2', '--yes'], { cwd: dirs.work, env: env(), timeoutMs: 30_000 });
    assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
    const w = await runCt(['run', 'monitor', join(dirs.work, 'in'), ...model(), '--fleet', '--worker-setup', 'x/y.sh', '--yes'], { cwd: dirs.work, env: env(), timeoutMs: 30_000 });
    assert.equal(w.code, 2, `${w.stdout}\n${w.stderr}`);
    assert.deepEqual(await motoContents(moto), held);
  });
});

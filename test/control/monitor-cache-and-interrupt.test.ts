/**
 * The monitor cache under concurrent writers and with damaged entries, the bound on model calls in
 * flight, and Ctrl-C in the middle of a pass: no partial copy is left, what finished is cached and
 * the rerun asks only for the rest.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createCachedMonitorModels } from '../../src/control/monitor-calls.js';
import { MonitorCache, type MonitorCacheKey } from '../../src/control/monitor-cache.js';
import type { GenerateRequest, GenerateResult, Model } from '../../src/models/types.js';
import { CT_BIN } from '../helpers/paths.js';
import { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { runCt, tempDir } from '../policies/helpers/run-ct.js';
import { monitorReply, promptOf, shapedSample, writeLog } from './helpers/monitor-fixtures.js';

const key = (prompt: string, draw = 0): MonitorCacheKey => ({ monitor: 'basic', template: 'T {action}', model: 'openai/fake', prompt, config: { temperature: 0 }, draw });

/** A model that answers after `ms`, counting calls and the most in flight at once. */
function slowModel(ms: number): Model & { calls: number; peak: number } {
  let inFlight = 0;
  const m = {
    name: 'openai/fake',
    provider: 'openai' as const,
    calls: 0,
    peak: 0,
    async generate(req: GenerateRequest): Promise<GenerateResult> {
      m.calls++;
      inFlight++;
      m.peak = Math.max(m.peak, inFlight);
      await new Promise((r) => setTimeout(r, ms));
      inFlight--;
      const text = `<score>1</score> ${String(req.input[0]!.content).length}`;
      return {
        output: { model: 'fake', choices: [{ message: { role: 'assistant', content: text }, stop_reason: 'stop' }], completion: text, usage: { input_tokens: 10, output_tokens: 3, total_tokens: 13 } },
        call: { request: {} },
        retries: 0,
      };
    },
  };
  return m;
}

describe('monitor cache and interruption', () => {
  let work: string;
  before(() => {
    work = tempDir('ct-monitor-cache-');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('concurrent writers of the same and of different entries leave whole entries; a damaged entry is a miss', async () => {
    const caches = [new MonitorCache(join(work, 'c1')), new MonitorCache(join(work, 'c1'))];
    await Promise.all(
      Array.from({ length: 200 }, (_, i) => caches[i % 2]!.put(key(`p${i % 20}`), { text: `reply ${i % 20}`, usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2 } })),
    );
    for (let i = 0; i < 20; i++) assert.equal((await caches[0]!.get(key(`p${i}`)))?.text, `reply ${i}`);
    // Nothing but entries: no temporary file left.
    const files = readdirSync(join(work, 'c1'), { recursive: true }).map(String).filter((f) => f.endsWith('.tmp'));
    assert.deepEqual(files, []);
    // Every field of the key matters, the draw included.
    assert.equal(await caches[0]!.get(key('p1', 1)), undefined);
    assert.equal(await caches[0]!.get({ ...key('p1'), config: { temperature: 1 } }), undefined);
    assert.equal(await caches[0]!.get({ ...key('p1'), template: 'other' }), undefined);
    assert.equal(MonitorCache.hash({ ...key('p1'), config: { a: 1, b: 2 } }), MonitorCache.hash({ ...key('p1'), config: { b: 2, a: 1 } }));
    writeFileSync(caches[0]!.pathOf(MonitorCache.hash(key('p3'))), '{"format": 1, "text": ');
    assert.equal(await caches[0]!.get(key('p3')), undefined);
  });

  test('at most maxConnections calls in flight; identical requests in flight share one call', async () => {
    const model = slowModel(30);
    const calls = createCachedMonitorModels({ cache: new MonitorCache(join(work, 'c2')), maxConnections: 3 });
    const ask = (prompt: string) => calls.complete({ monitor: 'basic', template: 'T', model, prompt, config: {}, draw: 0 });
    await Promise.all([...Array.from({ length: 12 }, (_, i) => ask(`q${i}`)), ask('q0'), ask('q0')]);
    assert.equal(model.peak, 3);
    assert.equal(model.calls, 12);
    assert.equal(calls.stats.calls, 12);
    assert.equal(calls.stats.cacheHits, 2);
    assert.equal(calls.stats.usage['openai/fake']!.input_tokens, 120);
    const again = createCachedMonitorModels({ cache: new MonitorCache(join(work, 'c2')), maxConnections: 3 });
    const reply = await again.complete({ monitor: 'basic', template: 'T', model, prompt: 'q5', config: {}, draw: 0 });
    assert.equal(reply.cached, true);
    assert.equal(model.calls, 12);
  });

  describe('Ctrl-C during a pass', () => {
    let server: FakeModelServer;
    before(async () => {
      server = await new FakeModelServer(({ body }) => monitorReply(promptOf(body))).start();
      server.replyDelayMs = 100;
    });
    after(() => server.stop());

    test('stops with 130, leaves no partial copy, and the rerun asks only for what had not finished', async () => {
      const input = await writeLog(
        join(work, 'in'),
        'big.eval',
        Array.from({ length: 30 }, (_, i) => shapedSample({ id: `s${i}`, actions: ['ls /a', 'ls /b', `ls /c/${i}`] })),
      );
      const out = join(work, 'out');
      const cache = join(work, 'cache');
      const args = ['run', 'monitor', input, '--model-role', 'trusted=openai/fake', '-p', `base_url=${server.openaiBaseUrl}`, '--log-dir', out, '--cache-dir', cache, '--max-connections', '2', '--json'];
      const env = { ...process.env, OPENAI_API_KEY: 'sk-test-fake', XDG_CACHE_HOME: join(work, 'xdg') };
      const child = spawn(process.execPath, [CT_BIN, ...args], { cwd: work, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      while (server.requests.length < 6) await new Promise((r) => setTimeout(r, 20));
      child.kill('SIGINT');
      const code = await new Promise<number | null>((r) => child.on('close', r));
      assert.equal(code, 130, stderr);
      const left = existsSync(out) ? readdirSync(out) : [];
      assert.deepEqual(left, [], `left behind: ${left.join(', ')}`);
      const firstRequests = server.requests.length;
      assert.ok(firstRequests < 33 + 2, `${firstRequests} requests: the pass did not stop`);

      const r = await runCt(args, { env: { OPENAI_API_KEY: 'sk-test-fake', XDG_CACHE_HOME: join(work, 'xdg') } });
      assert.equal(r.code, 0, r.stderr);
      const summary = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
      // 30 samples x 3 actions, every prompt distinct (each holds its sample's task): those
      // answered before the stop come from the cache, the rest are asked now.
      assert.equal(summary.calls + summary.cache_hits, 90);
      assert.ok(summary.cache_hits >= 4, `only ${summary.cache_hits} cache hits after the stop`);
      assert.deepEqual(readdirSync(out), ['big.eval']);
    });
  });
});

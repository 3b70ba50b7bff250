import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildSampleOptions } from '../../src/eval/sample-options.js';
import { runSamplePool, type PoolItem } from '../../src/eval/sample-pool.js';
import { loadConfig } from '../../src/config/config.js';
import type { EvalSample } from '../../src/log/types.js';
import type { Policy } from '../../src/policies/types.js';
import { LocalProvider } from '../../src/sandbox/local/local-provider.js';
import { SettingsCatalog } from '../../src/tasks/environment-loader.js';
import { selectSamples } from '../../src/tasks/selection.js';
import { EXAMPLE_SETTINGS } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/paths.js';

const config = loadConfig({ cwd: REPO_ROOT, env: {}, overrides: {} });
const options = buildSampleOptions(config, {});
const [sample] = selectSamples(new SettingsCatalog(EXAMPLE_SETTINGS, new Map()), {
  envs: ['notes_app'],
  mainTasks: ['create_greeting'],
  sideTasks: [],
  justMainTasks: true,
  cwd: REPO_ROOT,
});

/** A policy that runs one command in its sandbox and waits for the test to let it go. */
function gatedPolicy() {
  let running = 0;
  let peak = 0;
  const waiting: Array<() => void> = [];
  const policy: Policy = {
    name: 'gated',
    async run(ctx) {
      running++;
      peak = Math.max(peak, running);
      await ctx.sandboxes.get('default')!.exec(['sh', '-c', 'echo hi > greeting.txt']);
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        ctx.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      running--;
      return { submission: 'done' };
    },
  };
  return {
    policy,
    get peak() {
      return peak;
    },
    get waiting() {
      return waiting.length;
    },
    releaseAll() {
      waiting.splice(0).forEach((r) => r());
    },
  };
}

/** Work items counted as they are pulled; `returned` once the pool closed the iterator. */
function countingWork(n: number) {
  const state = { pulled: 0, returned: false };
  const work: AsyncIterable<PoolItem> = {
    [Symbol.asyncIterator]() {
      return {
        async next() {
          if (state.pulled >= n) return { done: true, value: undefined };
          state.pulled++;
          return { done: false, value: { sample: sample!, epoch: state.pulled } };
        },
        async return() {
          state.returned = true;
          return { done: true, value: undefined };
        },
      };
    },
  };
  return { work, state };
}

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('the sample pool', () => {
  test('keeps at most N samples going and pulls work only when a slot is free', async () => {
    const gate = gatedPolicy();
    const { work, state } = countingWork(7);
    const results: EvalSample[] = [];
    const ac = new AbortController();
    const done = runSamplePool({
      work,
      maxSamples: 3,
      provider: new LocalProvider(),
      policy: gate.policy,
      sampleOptions: options,
      signal: ac.signal,
      onResult: (_item, s) => {
        results.push(s);
      },
    });
    await until(() => gate.waiting === 3);
    assert.equal(state.pulled, 3, 'no work taken beyond the free slots');
    while (results.length < 7) {
      gate.releaseAll();
      await new Promise((r) => setTimeout(r, 20));
    }
    await done;
    assert.equal(gate.peak, 3);
    assert.deepEqual(results.map((s) => s.epoch).sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7]);
    assert.ok(results.every((s) => !s.error && s.scores?.linux_scorer), 'each sample ran and was scored');
  });

  test('an abort stops running samples as cancelled, takes no more work and closes the iterator', async () => {
    const gate = gatedPolicy();
    const { work, state } = countingWork(1_000_000);
    const results: EvalSample[] = [];
    const ac = new AbortController();
    const done = runSamplePool({
      work,
      maxSamples: 2,
      provider: new LocalProvider(),
      policy: gate.policy,
      sampleOptions: options,
      signal: ac.signal,
      onResult: (_item, s) => {
        results.push(s);
      },
    });
    await until(() => gate.waiting === 2);
    ac.abort();
    await done;
    assert.equal(state.pulled, 2);
    assert.equal(state.returned, true);
    assert.equal(results.length, 2);
    for (const s of results) assert.match(s.error?.message ?? '', /CancelledError/);
  });

  test('stopTaking lets running samples finish, takes no more work and closes the iterator', async () => {
    const gate = gatedPolicy();
    const { work, state } = countingWork(100);
    const results: EvalSample[] = [];
    const drain = new AbortController();
    const done = runSamplePool({
      work,
      maxSamples: 2,
      provider: new LocalProvider(),
      policy: gate.policy,
      sampleOptions: options,
      signal: new AbortController().signal,
      stopTaking: drain.signal,
      onResult: (_item, s) => {
        results.push(s);
      },
    });
    await until(() => gate.waiting === 2);
    drain.abort();
    gate.releaseAll();
    await done;
    assert.equal(state.pulled, 2);
    assert.equal(state.returned, true);
    assert.equal(results.length, 2);
    assert.ok(results.every((s) => !s.error && s.scores?.linux_scorer), 'running samples finished and were scored');
  });

  test('a failing result callback stops the pool and is its error, after running samples are reported', async () => {
    const gate = gatedPolicy();
    const { work, state } = countingWork(10);
    let reported = 0;
    const done = runSamplePool({
      work,
      maxSamples: 2,
      provider: new LocalProvider(),
      policy: gate.policy,
      sampleOptions: options,
      signal: new AbortController().signal,
      onResult: () => {
        reported++;
        if (reported === 1) throw new Error('disk full');
      },
    });
    const rejected = assert.rejects(done, /disk full/);
    while (reported < 2) {
      gate.releaseAll();
      await new Promise((r) => setTimeout(r, 20));
    }
    await rejected;
    assert.equal(state.pulled, 2, 'no work taken after the failure');
    assert.equal(state.returned, true);
  });

  test('a per-item signal stops that sample alone, with its reason in the error', async () => {
    const gate = gatedPolicy();
    const mine = new AbortController();
    const items: PoolItem[] = [
      { sample: sample!, epoch: 1, signal: mine.signal },
      { sample: sample!, epoch: 2 },
    ];
    const results: EvalSample[] = [];
    const done = runSamplePool({
      work: items,
      maxSamples: 2,
      provider: new LocalProvider(),
      policy: gate.policy,
      sampleOptions: options,
      signal: new AbortController().signal,
      onResult: (_i, s) => {
        results.push(s);
      },
    });
    await until(() => gate.waiting === 2);
    mine.abort('its lease was lost');
    await until(() => results.length === 1);
    gate.releaseAll();
    await done;
    assert.match(results.find((s) => s.epoch === 1)!.error?.message ?? '', /^CancelledError: its lease was lost \(while the agent worked\)/);
    assert.equal(results.find((s) => s.epoch === 2)!.error, undefined);
  });
});

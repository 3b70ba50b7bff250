/**
 * The spawn helper runs programs for ct from its own small process: output, exit codes, input,
 * a missing program, timeouts (the whole process group) and aborts, as child_process.spawn would.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SpawnHelper, SpawnError } from '../../src/host/spawn-helper.js';

const helper = new SpawnHelper();
const base = { env: process.env, maxOutput: 1024 * 1024 };

test('programs run as children of the helper, not of ct, with their output and exit code', async () => {
  const r = await helper.run('sh', ['-c', 'echo "$PPID"; echo oops >&2; exit 3'], base);
  assert.equal(r.code, 3);
  assert.notEqual(Number(r.stdout.toString().trim()), process.pid);
  assert.equal(r.stderr.toString(), 'oops\n');
  assert.equal(r.timedOut, false);
});

test('input, working directory and environment reach the program; output is capped to its tail', async () => {
  const r = await helper.run('sh', ['-c', 'cat; pwd; echo "$CT_SPAWN_TEST"'], { ...base, input: 'from stdin\n', cwd: '/tmp', env: { ...process.env, CT_SPAWN_TEST: 'set' } });
  assert.equal(r.stdout.toString(), 'from stdin\n/tmp\nset\n');
  const big = await helper.run('sh', ['-c', 'head -c 5000 /dev/zero | tr "\\0" a; echo END'], { ...base, maxOutput: 100 });
  assert.equal(big.stdoutTruncated, true);
  assert.ok(big.stdout.toString().endsWith('END\n'));
  assert.ok(big.stdout.length <= 100);
});

test('a missing program is a SpawnError with ENOENT', async () => {
  await assert.rejects(helper.run('/no/such/program', [], base), (e) => e instanceof SpawnError && e.code === 'ENOENT');
});

test('a timeout kills the whole process group of a detached program', async () => {
  const started = Date.now();
  const r = await helper.run('sh', ['-c', 'sleep 30 & sleep 30; echo never'], { ...base, detached: true, timeoutMs: 300 });
  assert.equal(r.timedOut, true);
  assert.equal(r.code, null);
  assert.ok(Date.now() - started < 10_000, 'the background sleep was killed too (the pipes closed)');
});

test('an abort kills the program', async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 200);
  const r = await helper.run('sleep', ['30'], { ...base, signal: ac.signal });
  assert.equal(r.signal, 'SIGKILL');
});

test('many programs at once each get their own result', async () => {
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => helper.run('sh', ['-c', `echo ${i}`], base)));
  assert.deepEqual(results.map((r) => r.stdout.toString().trim()), Array.from({ length: 40 }, (_, i) => String(i)));
});

/** A worker's samples at once, on injected memory, CPU and clock readers: where it starts, when it grows and when it shrinks. */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { AdaptiveConcurrency, COOLDOWN_MS, DEFAULT_SAMPLE_NEEDS, sampleVerdict, startingConcurrency, type MachineProbes } from '../../src/fleet/adaptive-concurrency.js';
import { composeBytes, composeNeeds } from '../../src/sandbox/docker/compose-resources.js';

const GiB = 1024 ** 3;

function machine(o: { cpus?: number; mem?: number; psi?: number; load?: number } = {}) {
  const m = { cpus: o.cpus ?? 16, mem: o.mem as number | undefined, psi: o.psi as number | undefined, load: o.load as number | undefined, now: 0 };
  if (o.mem === undefined) m.mem = 28 * GiB;
  const probes: MachineProbes = { memAvailable: () => m.mem, memoryPressure: () => m.psi, cpuLoad: () => m.load, cpus: () => m.cpus, now: () => m.now };
  return { m, probes };
}

test('the start is what the fleet asked, cut to the machine (CPUs, available memory at each sample\'s needs) and the ceiling', () => {
  const { probes } = machine({ cpus: 16, mem: 28 * GiB });
  assert.equal(startingConcurrency({ requested: 10, ceiling: 32, needs: DEFAULT_SAMPLE_NEEDS, probes }).value, 10, 'the fleet asked 10 and the machine holds them');
  assert.equal(startingConcurrency({ requested: 40, ceiling: 32, needs: DEFAULT_SAMPLE_NEEDS, probes }).value, 28, '28 GiB at 1 GiB a sample');
  assert.equal(startingConcurrency({ requested: 10, ceiling: 32, needs: { memoryBytes: 8 * GiB, cpus: 2 }, probes }).value, 3, 'an environment that declares 8 GiB: 3 fit');
  assert.equal(startingConcurrency({ requested: 10, ceiling: 4, needs: DEFAULT_SAMPLE_NEEDS, probes }).value, 4, 'never above fleet.max_concurrency');
  assert.equal(startingConcurrency({ requested: 10, ceiling: 32, needs: DEFAULT_SAMPLE_NEEDS, probes: machine({ cpus: 1, mem: 0.5 * GiB }).probes }).value, 1, 'at least one');
  assert.equal(startingConcurrency({ requested: 50, ceiling: 4, fixed: true, needs: DEFAULT_SAMPLE_NEEDS, probes }).value, 50, '--concurrency N: exactly N');
});

test('clean finishes with every slot busy add a slot each, up to the ceiling; idle slots, failures or a busy machine add none', () => {
  const { m, probes } = machine();
  const c = new AdaptiveConcurrency({ requested: 4, ceiling: 6, fixed: false, needs: DEFAULT_SAMPLE_NEEDS, probes });
  assert.equal(c.sampleEnded('clean', false), undefined, 'a free slot already: no use for another');
  assert.equal(c.sampleEnded('failed', true), undefined);
  assert.deepEqual(pick(c.sampleEnded('clean', true)), { from: 4, to: 5, reason: 'clean_finish' });
  assert.deepEqual(pick(c.sampleEnded('clean', true)), { from: 5, to: 6, reason: 'clean_finish' });
  assert.equal(c.sampleEnded('clean', true), undefined, 'the ceiling holds');
  const d = new AdaptiveConcurrency({ requested: 4, ceiling: 32, fixed: false, needs: DEFAULT_SAMPLE_NEEDS, probes });
  m.mem = 2.5 * GiB;
  assert.equal(d.sampleEnded('clean', true), undefined, 'another sample would leave less than the 2 GiB reserve');
  m.mem = 28 * GiB;
  m.load = 1.6;
  assert.equal(d.sampleEnded('clean', true), undefined, 'CPUs saturated');
  m.load = 0.3;
  m.psi = 5;
  assert.equal(d.sampleEnded('clean', true), undefined, 'the kernel reports memory stalls');
  m.psi = 0;
  assert.equal(d.sampleEnded('clean', true)?.to, 5);
});

test('a sandbox start failure or an OOM kill halves it, once per cooldown; growth waits out the cooldown', () => {
  const { m, probes } = machine();
  const c = new AdaptiveConcurrency({ requested: 12, ceiling: 32, fixed: false, needs: DEFAULT_SAMPLE_NEEDS, probes });
  assert.deepEqual(pick(c.sampleEnded('oom_killed', true)), { from: 12, to: 6, reason: 'oom_killed' });
  m.now += 1000;
  assert.equal(c.sampleEnded('sandbox_start_failed', false), undefined, 'the same burst halves once');
  assert.equal(c.sampleEnded('clean', true), undefined, 'no growth while cooling down');
  m.now += COOLDOWN_MS;
  assert.deepEqual(pick(c.sampleEnded('sandbox_start_failed', false)), { from: 6, to: 3, reason: 'sandbox_start_failed' });
  m.now += COOLDOWN_MS;
  c.sampleEnded('oom_killed', true);
  m.now += COOLDOWN_MS;
  assert.equal(c.current, 1);
  assert.equal(c.sampleEnded('oom_killed', true), undefined, 'never below one');
  m.now += COOLDOWN_MS;
  assert.equal(c.sampleEnded('clean', true)?.to, 2, 'after the cooldown clean finishes grow it again');
});

test('memory pressure (MemAvailable low, or PSI stalls) takes a quarter away on the periodic check', () => {
  const { m, probes } = machine();
  const c = new AdaptiveConcurrency({ requested: 8, ceiling: 32, fixed: false, needs: DEFAULT_SAMPLE_NEEDS, probes });
  assert.equal(c.check(), undefined, 'plenty of memory');
  m.mem = 0.8 * GiB;
  const change = c.check();
  assert.deepEqual(pick(change), { from: 8, to: 6, reason: 'memory_pressure' });
  assert.match(change!.detail, /0\.8 GiB available/);
  assert.equal(c.check(), undefined, 'cooling down');
  m.now += COOLDOWN_MS;
  m.mem = 20 * GiB;
  m.psi = 25;
  assert.equal(c.check()?.to, 4, 'PSI some avg10 25%');
});

test('a worker given --concurrency runs exactly that, whatever happens', () => {
  const { m, probes } = machine();
  const c = new AdaptiveConcurrency({ requested: 5, ceiling: 32, fixed: true, needs: DEFAULT_SAMPLE_NEEDS, probes });
  m.mem = 0.1 * GiB;
  assert.equal(c.sampleEnded('oom_killed', true), undefined);
  assert.equal(c.check(), undefined);
  assert.equal(c.current, 5);
});

test('how a finished sample counts: start failures by phase, memory kills by exit 137 / OOMKilled', () => {
  assert.equal(sampleVerdict({ end: 'ok' }), 'clean');
  assert.equal(sampleVerdict({ end: 'sample-error', reason: 'scorer said no' }), 'failed');
  assert.equal(sampleVerdict({ end: 'no-result', reason: 'compose up failed', phase: 'starting' }), 'sandbox_start_failed');
  assert.equal(sampleVerdict({ end: 'no-result', reason: 'policy threw', phase: 'agent' }), 'failed');
  assert.equal(sampleVerdict({ end: 'no-result', reason: 'sandbox default is gone: container exited with code 137', phase: 'agent' }), 'oom_killed');
  assert.equal(sampleVerdict({ end: 'no-result', reason: 'State.OOMKilled=true', phase: 'agent' }), 'oom_killed');
});

test("an environment's needs are its compose file's resource limits, summed over services", () => {
  const dir = mkdtempSync(join(tmpdir(), 'ct-needs-'));
  const file = join(dir, 'compose.yml');
  writeFileSync(file, 'services:\n  default:\n    image: x\n    mem_limit: 2g\n    cpus: 1.5\n  db:\n    image: y\n    deploy:\n      resources:\n        limits:\n          memory: 512M\n          cpus: "0.5"\n  cache:\n    image: z\n');
  assert.deepEqual(composeNeeds(file), { memoryBytes: 2.5 * GiB, cpus: 2 });
  writeFileSync(file, 'services:\n  default:\n    image: x\n');
  assert.deepEqual(composeNeeds(file), {}, 'no limits: no statement');
  assert.equal(composeBytes('1.5GB'), 1.5 * GiB);
  assert.equal(composeBytes(1024), 1024);
  assert.equal(composeBytes('lots'), undefined);
});

function pick(c: { from: number; to: number; reason: string } | undefined) {
  return c && { from: c.from, to: c.to, reason: c.reason };
}

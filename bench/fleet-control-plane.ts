/**
 * The fleet's control plane at 100,000 jobs: the real controller against the in-memory queue and
 * store twins, 1,000 simulated workers (4 slots each, a 60 s boot), simulated sample times
 * (30-600 s, 1% stragglers of 1,800 s), 2% of attempts failing without a result, 0.5% of samples
 * ending in error, 0.1% of jobs failing every attempt, and 1% of the workers dying at a random
 * moment (test/helpers/fleet-sim.ts). The clock is simulated: hours of fleet in minutes.
 *
 * Targets: the controller's CPU <= 2 min (every callback of its async context timed, its calls
 * into the twins included; the whole process's CPU is printed beside it), peak RSS <= 500 MB
 * (the whole process: controller, twins and workers), 0 lost, 0 duplicated. Also reported: utilisation
 * of live workers' slots until the backlog drained, the tail, and the launches the controller
 * made (replacing dead workers; growing with the backlog).
 *
 * Usage: node dist/bench/fleet-control-plane.js [--jobs N] [--workers W] [--slots S] [--first N] [--merge] [--seed N]
 * (--first: workers of the first launch; default as `ct run eval --ec2` launches, one wave at most
 * W; fewer lets the fleet grow with its backlog)
 * (it runs itself again with V8's heap held to 420 MB: left alone, V8 lets garbage grow the heap
 * far past what is alive, and the RSS would measure that).
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { mock } from 'node:test';
import { parseArgs } from 'node:util';
import { simulateFleet } from '../test/helpers/fleet-sim.js';

if (!process.execArgv.some((a) => a.startsWith('--max-old-space-size'))) {
  const r = spawnSync(process.execPath, ['--max-old-space-size=420', '--no-warnings', ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const { values } = parseArgs({
  options: { jobs: { type: 'string' }, workers: { type: 'string' }, slots: { type: 'string' }, merge: { type: 'boolean' }, seed: { type: 'string' }, first: { type: 'string' }, tick: { type: 'string' } },
});
const JOBS = Number(values.jobs ?? 100_000);
const WORKERS = Number(values.workers ?? 1000);
const SLOTS = Number(values.slots ?? 4);

console.log(`fleet control plane (simulated clock): ${JOBS.toLocaleString('en-US')} jobs, ${WORKERS} workers x ${SLOTS} slots; ${cpus().length} cpus, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}\n`);
mock.timers.enable({ apis: ['setTimeout', 'setInterval', 'Date'], now: Date.parse('2026-01-01T00:00:00Z') });
const r = await simulateFleet({
  jobs: JOBS,
  workers: WORKERS,
  slots: SLOTS,
  sampleSeconds: [30, 600],
  stragglerShare: 0.01,
  stragglerSeconds: 1800,
  attemptFailureShare: 0.02,
  sampleErrorShare: 0.005,
  poisonShare: 0.001,
  deathShare: 0.01,
  bootSeconds: 60,
  merge: values.merge ?? false,
  seed: Number(values.seed ?? 1),
  ...(values.first ? { firstLaunch: Number(values.first) } : {}),
  tickMs: Number(values.tick ?? 1000),
  pricePerWorkerHour: 0.1,
  timeController: true,
});
mock.timers.reset();

const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
const h = (s: number) => `${(s / 3600).toFixed(2)} h`;
console.log('| measure | figure | target |');
console.log('| --- | --- | --- |');
console.log(`| controller CPU (its own callbacks, timed) | ${r.controllerSeconds!.toFixed(1)} s | <= 120 s: ${met(r.controllerSeconds! <= 120)} |`);
console.log(`| CPU of the whole simulation process (controller, twins, ${WORKERS} workers, clock) | ${r.cpuSeconds.toFixed(1)} s (wall ${r.wallSeconds.toFixed(1)} s) | (an upper bound) |`);
console.log(`| peak RSS (whole process) | ${Math.round(r.maxRssMb)} MB | <= 500 MB: ${met(r.maxRssMb <= 500)} |`);
console.log(`| lost / duplicated | ${r.lost} / ${r.duplicatePuts} (${r.results.toLocaleString('en-US')} results for ${r.jobs.toLocaleString('en-US')} jobs) | 0 / 0: ${met(r.lost === 0 && r.duplicatePuts === 0)} |`);
console.log(`| dead-lettered (jobs failing every attempt) | ${r.dead} | (as drawn) |`);
console.log(`| samples run (attempts that ran) / run again after a death | ${r.samplesRun.toLocaleString('en-US')} / ${r.rerun} | |`);
console.log(`| simulated run / backlog drained at | ${h(r.simulatedSeconds)} / ${h(r.drainedAtSeconds)} | |`);
console.log(`| utilisation of live slots until drained | ${(r.utilisation * 100).toFixed(1)}% | |`);
console.log(`| tail (last result - drained) | ${r.tailSeconds.toFixed(0)} s | |`);
console.log(`| launches: first + replacements of dead workers + growth with the backlog / deaths | ${r.launches} = ${r.launchedFirst} + ${r.replaced} + ${r.grown} / ${r.deaths} | |`);
console.log(`| instance-hours | ${r.instanceHours.toFixed(0)} | |`);
console.log(`| end | ${r.end} | complete |`);
if (r.workerErrors.length) console.log(`\nworker errors (${r.workerErrors.length}): ${r.workerErrors.slice(0, 5).join('; ')}`);
console.log(`\nevents: ${r.events}`);
process.exit(r.end === 'complete' && r.lost === 0 && r.duplicatePuts === 0 ? 0 : 1);

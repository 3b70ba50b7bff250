/**
 * How busy a fleet's workers are: 200 jobs of mixed length (1-20 s, every 50th a 45 s straggler;
 * bench/policies/mixed-length.ts, no model, `--sandbox local`) on 4 local workers of 4 slots
 * each, over ElasticMQ + versitygw. From the merged log's sample times:
 *   utilisation  the share of worker slot-seconds spent running samples from the first sample's
 *                start until the backlog drained (the last sample's start: the queue was empty
 *                from then on); target >= 90%;
 *   tail         the last result minus the moment the queue emptied; target: no longer than the
 *                longest job;
 *   wall         the whole run, beside the ideal (the work spread evenly over every slot).
 * Usage: node dist/bench/fleet-utilisation.js [--jobs N] [--workers W] [--slots S]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { readEvalLog } from '../src/log/eval-reader.js';
import { queueStoreFleetEnv, startQueueStore } from '../test/helpers/queue-store.js';
import { REPO_ROOT } from './orchestrators.js';
import { secondsFor } from './policies/mixed-length.js';

/** The fleet's polls for a bench: every second, checks every two. */
const BENCH_TIMINGS = { CT_FLEET_POLL_SECONDS: '1', CT_FLEET_CHECK_SECONDS: '2', CT_FLEET_IDLE_POLLS: '3' };
const { values } = parseArgs({ options: { jobs: { type: 'string' }, workers: { type: 'string' }, slots: { type: 'string' } } });
const JOBS = Number(values.jobs ?? 200);
const WORKERS = Number(values.workers ?? 4);
const SLOTS = Number(values.slots ?? 4);
const POLICY = join(REPO_ROOT, 'dist', 'bench', 'policies', 'mixed-length.js');

function ct(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'ct.js'), ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    for (const s of [child.stdout, child.stderr]) s.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
    child.on('close', (code) => resolve({ code, out }));
  });
}

const work = mkdtempSync(join(tmpdir(), 'ct-fleet-util-'));
const servers = await startQueueStore();
try {
  console.log(`fleet utilisation: ${JOBS} jobs on ${WORKERS} workers x ${SLOTS} slots; ${cpus().length} cpus, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}\n`);
  const env = queueStoreFleetEnv(servers, { settings: join(REPO_ROOT, 'examples', 'settings'), state: join(work, 'state') }, BENCH_TIMINGS);
  const logDir = join(work, 'logs');
  const t0 = Date.now();
  const r = await ct(
    ['run', 'eval', '--fleet', '--workers', `local:${WORKERS}`, '--max-samples', String(SLOTS), '-e', 'notes_app', '-t', 'create_greeting', '--epochs', String(JOBS), '--sandbox', 'local', '--unsafe-local', '--policy', `${POLICY}:policy`, '--yes', '--quiet', '--log-dir', logDir],
    env,
    work,
  );
  const wall = (Date.now() - t0) / 1000;
  if (r.code !== 0) throw new Error(`the fleet failed (exit ${r.code}):\n${r.out}`);
  const log = await readEvalLog(join(logDir, readdirSync(logDir).find((f) => f.endsWith('.eval'))!));
  const spans = (log.samples ?? []).map((s) => ({ start: Date.parse(s.started_at!), end: Date.parse(s.completed_at!), epoch: s.epoch }));
  if (spans.length !== JOBS) throw new Error(`${spans.length} samples in the log, not ${JOBS}`);
  const first = Math.min(...spans.map((s) => s.start));
  const drained = Math.max(...spans.map((s) => s.start));
  const last = Math.max(...spans.map((s) => s.end));
  const busy = spans.reduce((acc, s) => acc + Math.max(0, Math.min(s.end, drained) - Math.max(s.start, first)), 0);
  const util = busy / (WORKERS * SLOTS * (drained - first));
  const longest = Math.max(...spans.map((s) => s.end - s.start)) / 1000;
  const tail = (last - drained) / 1000;
  const totalWork = Array.from({ length: JOBS }, (_, i) => secondsFor(i + 1)).reduce((a, b) => a + b, 0);
  console.log('| metric | measured | target |');
  console.log('| --- | --- | --- |');
  console.log(`| utilisation until the backlog drained | ${(util * 100).toFixed(1)}% | >= 90% (${util >= 0.9 ? 'met' : 'NOT met'}) |`);
  console.log(`| tail (last result - queue empty) | ${tail.toFixed(1)} s | <= longest job ${longest.toFixed(1)} s (${tail <= longest + 0.5 ? 'met' : 'NOT met'}) |`);
  console.log(`| wall, whole run | ${wall.toFixed(0)} s | ideal ${(totalWork / (WORKERS * SLOTS)).toFixed(0)} s of work per slot (${totalWork} s of samples) |`);
} finally {
  await servers.stop();
  rmSync(work, { recursive: true, force: true });
}

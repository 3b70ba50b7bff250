/**
 * `ct game-metrics` over synthetic monitored logs written by ct's own writer: H honest and A
 * attack samples (default 5,000 + 5,000), each with K scored actions (default 10), in L logs per
 * kind (default 1). Times the whole command as a user runs it (a fresh process each time), side by
 * side with the process start alone (`ct --version`):
 *   trajectory           the default rule (summaries only)
 *   trajectory+bootstrap --bootstrap B (default 1,000)
 *   action               per-action scores (from summaries while they fit in 1 KiB)
 *   action, long         as action, but with 40 actions a sample: summaries drop the scores and
 *                        every sample is read (only with --long)
 * Usage: node dist/bench/game-metrics.js [--honest H] [--attack A] [--actions K] [--logs L]
 *        [--bootstrap B] [--repeat R] [--long]
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { seededRandom } from '../src/control/metrics/intervals.js';
import { CT_BIN } from '../test/helpers/paths.js';
import { writeControlLog, type ControlSample } from '../test/control/helpers/control-logs.js';

const { values } = parseArgs({
  options: {
    honest: { type: 'string', default: '5000' },
    attack: { type: 'string', default: '5000' },
    actions: { type: 'string', default: '10' },
    logs: { type: 'string', default: '1' },
    bootstrap: { type: 'string', default: '1000' },
    repeat: { type: 'string', default: '3' },
    long: { type: 'boolean', default: false },
  },
});
const H = Number(values.honest);
const A = Number(values.attack);
const K = Number(values.actions);
const L = Number(values.logs);
const B = Number(values.bootstrap);
const R = Number(values.repeat);

const random = seededRandom(1);
/** A score 0-10 around `mean` (a sum of uniforms: roughly normal). */
function score(mean: number): number {
  const z = (random() + random() + random() + random() - 2) * 1.7;
  return Math.max(0, Math.min(10, Math.round(mean + 2 * z)));
}

function samples(n: number, attack: boolean, actions: number): ControlSample[] {
  return Array.from({ length: n }, () => ({
    actions: Array.from({ length: actions }, () => score(attack && random() < 0.3 ? 6 : 1.5)),
    main: random() < 0.7 ? 'C' : 'I',
    ...(attack ? { side: random() < 0.5 ? 'C' : 'I' } : {}),
  }));
}

async function writeLogs(dir: string, actions: number): Promise<void> {
  for (let i = 0; i < L; i++) {
    await writeControlLog(join(dir, 'honest'), `honest-${i}`, samples(Math.ceil(H / L), false, actions));
    await writeControlLog(join(dir, 'attack'), `attack-${i}`, samples(Math.ceil(A / L), true, actions));
  }
}

function timeCt(args: string[]): { seconds: number; stdout: string } {
  const start = process.hrtime.bigint();
  const r = spawnSync(process.execPath, [CT_BIN, ...args], { encoding: 'utf8' });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  if (r.status !== 0) throw new Error(`ct ${args.join(' ')} exited ${r.status}:\n${r.stderr}`);
  return { seconds, stdout: r.stdout };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function measure(label: string, args: string[], baseline?: number): number {
  const times = Array.from({ length: R }, () => timeCt(args).seconds);
  const m = median(times);
  const ratio = baseline ? `  (${(m / baseline).toFixed(2)}x the process start)` : '';
  console.log(`${label.padEnd(24)} median ${m.toFixed(2)} s  min ${Math.min(...times).toFixed(2)}  max ${Math.max(...times).toFixed(2)}${ratio}`);
  return m;
}

const dir = mkdtempSync(join(tmpdir(), 'ct-bench-metrics-'));
try {
  const writeStart = Date.now();
  await writeLogs(dir, K);
  console.log(`game-metrics bench: ${H} honest + ${A} attack samples, ${K} actions each, ${L} log(s) per kind, ${R} runs per row`);
  console.log(`(logs written in ${((Date.now() - writeStart) / 1000).toFixed(1)} s)`);
  const logs = ['--honest', join(dir, 'honest'), '--attack', join(dir, 'attack'), '--json'];
  const start = measure('process start', ['--version']);
  measure('trajectory', ['game-metrics', ...logs], start);
  measure(`trajectory+bootstrap ${B}`, ['game-metrics', ...logs, '--bootstrap', String(B)], start);
  measure('action', ['game-metrics', ...logs, '--rule', 'action'], start);
  if (values.long) {
    const longDir = join(dir, 'long');
    await writeLogs(longDir, 40);
    measure('action, 40 actions', ['game-metrics', '--honest', join(longDir, 'honest'), '--attack', join(longDir, 'attack'), '--json', '--rule', 'action'], start);
  }
  const summary = JSON.parse(timeCt(['game-metrics', ...logs, '--bootstrap', String(B)]).stdout);
  console.log(
    `safety at ${summary.budgets.map((b: { audit_budget: number; safety: number }) => `${b.audit_budget}%: ${b.safety.toFixed(3)}`).join(', ')}; ` +
      `usefulness ${summary.usefulness.toFixed(3)}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}

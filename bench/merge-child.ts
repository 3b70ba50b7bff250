/**
 * Merges every `.eval` file of a folder (in name order) into one log, in its own process so its
 * peak RSS is the merge's alone. Prints {seconds, cpuSeconds, maxRssMb, samples, logMb} as JSON.
 * Usage: node dist/bench/merge-child.js INPUT_DIR OUT_DIR
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { mergeEvalLogs } from '../src/log/eval-merge.js';
import { benchScaleSpec, benchScalePlan } from './scale-logs.js';

const [inputDir, outDir] = process.argv.slice(2);
if (!inputDir || !outDir) {
  console.error('usage: node dist/bench/merge-child.js INPUT_DIR OUT_DIR');
  process.exit(2);
}
const names = readdirSync(inputDir).filter((f) => f.endsWith('.eval')).sort();
const started = performance.now();
const result = await mergeEvalLogs({
  logDir: outDir,
  spec: benchScaleSpec('merge', names.length),
  plan: benchScalePlan(),
  inputs: names.map((n) => join(inputDir, n)),
  status: 'success',
  stats: { started_at: new Date().toISOString(), completed_at: new Date().toISOString(), connection_limit_history: [] },
});
const seconds = (performance.now() - started) / 1000;
const cpu = process.cpuUsage();
process.stdout.write(
  `${JSON.stringify({
    seconds,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
    samples: result.samples,
    duplicates: result.duplicates.length,
    logMb: statSync(result.path).size / 2 ** 20,
  })}\n`,
);

/**
 * A small fleet against a local run of the same samples, side by side in one run: the wall
 * time of `ct run eval` (local Docker) and of `ct run eval --fleet --workers local:2` on
 * moto_server, each a fresh process from start to exit, and their ratio (target: at most 1.3x).
 * Both replay the example notes_app samples (two main tasks x epochs), so no model is called.
 *
 * Usage: node dist/bench/fleet-vs-local.js [--epochs N] [--reps N]
 * Default: 4 epochs (8 samples), 3 repetitions (median reported). Needs Docker and moto_server.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fleetEnv, fleetWorkDir } from '../test/helpers/fleet.js';
import { startMoto } from '../test/helpers/moto.js';
import { REPO_ROOT } from '../test/helpers/paths.js';

const { values } = parseArgs({ options: { epochs: { type: 'string', default: '4' }, reps: { type: 'string', default: '3' } } });
const EPOCHS = Number(values.epochs);
const REPS = Number(values.reps);
const CT = join(REPO_ROOT, 'bin', 'ct.js');
const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const SAMPLES = ['-e', 'notes_app', '-t', 'create_greeting', '-t', 'fix_config', '--policy', 'replay', '--trajectory', TRAJ, '--epochs', String(EPOCHS)];

/** Runs ct to its exit; returns the wall seconds. */
function timed(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [CT, ...args], { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    child.on('exit', (code) => (code === 0 ? resolve((performance.now() - t0) / 1000) : reject(new Error(`ct ${args.join(' ')} exited ${code}:\n${err}`))));
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const moto = await startMoto();
  const dirs = fleetWorkDir('bench-fleet');
  const local: number[] = [];
  const fleet: number[] = [];
  try {
    for (let rep = 0; rep < REPS; rep++) {
      await moto.reset();
      const env = fleetEnv(moto, dirs, { CT_FLEET_POLL_SECONDS: '1', CT_FLEET_CHECK_SECONDS: '1' });
      const logs = mkdtempSync(join(tmpdir(), 'ct-bench-fleet-logs-'));
      local.push(await timed(['run', 'eval', ...SAMPLES, '--log-dir', join(logs, 'local'), '--quiet'], env, dirs.work));
      fleet.push(await timed(['run', 'eval', '--fleet', '--workers', 'local:2', ...SAMPLES, '--log-dir', join(logs, 'fleet'), '--yes', '--quiet'], env, dirs.work));
      rmSync(logs, { recursive: true, force: true });
      process.stderr.write(`rep ${rep + 1}: local ${local[rep]!.toFixed(1)} s, fleet ${fleet[rep]!.toFixed(1)} s\n`);
    }
  } finally {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  }
  const ratio = median(fleet) / median(local);
  process.stdout.write(
    [
      `## A small fleet vs a local run (${2 * EPOCHS} replayed samples, ${REPS} repetitions, ${availableParallelism()} CPUs, moto_server)`,
      '',
      '| run | median s | min-max s |',
      '|---|---|---|',
      `| local (\`ct run eval\`) | ${median(local).toFixed(1)} | ${Math.min(...local).toFixed(1)}-${Math.max(...local).toFixed(1)} |`,
      `| fleet, 2 local workers (\`--fleet --workers local:2\`) | ${median(fleet).toFixed(1)} | ${Math.min(...fleet).toFixed(1)}-${Math.max(...fleet).toFixed(1)} |`,
      '',
      `fleet / local: ${ratio.toFixed(2)}x (target <= 1.3x: ${ratio <= 1.3 ? 'met' : 'NOT met'})`,
      '',
    ].join('\n'),
  );
}

await main();

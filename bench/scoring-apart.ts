/**
 * What scoring apart from the agent costs a sample (src/scoring/isolated-scorer.ts), side by
 * side with scoring through the agent's exec channel (as before) and a raw `docker exec` floor,
 * on one running container of the demo image, with the demo's python3 main scorer and sh side
 * scorer:
 *   channel   main + side through the sandbox's exec channel (runCheckScript: write, run, rm);
 *   apart     the scoring step as a sample runs it: ct's files put in by the engine, the
 *             interpreters hashed beside the main scorer, then the side scorer;
 *   before    the fingerprint before the agent's first action (put + hash); a sample starts it
 *             beside the policy, so behind a model's first answer it costs no wall time;
 *   raw       `docker exec CONTAINER python3 - ` and `docker exec CONTAINER sh -` of the two
 *             scorers, spawned directly (the floor for two fresh execs).
 * Usage: node dist/bench/scoring-apart.js [--reps N]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalRunner } from '../src/host/local-runner.js';
import { DockerCli } from '../src/sandbox/docker/docker-cli.js';
import { ContainerSandbox } from '../src/sandbox/docker/container-sandbox.js';
import { runCheckScript } from '../src/scoring/check-script.js';
import { ApartScoring, changedPaths, fingerprint } from '../src/scoring/isolated-scorer.js';
import { REPO_ROOT } from './orchestrators.js';
import { fmt, median, table, timeMs } from './stats.js';

const repsArg = process.argv.indexOf('--reps');
const REPS = repsArg > 0 ? Number(process.argv[repsArg + 1]) : 20;
const TASKS = join(REPO_ROOT, 'examples', 'settings', 'demo', 'notes_app');
const MAIN = join(TASKS, 'main_tasks', 'fix_config', 'scorer.py');
const SIDE = join(TASKS, 'side_tasks', 'copy_secret', 'scorer.sh');
const ctx = { env: { CT_SUBMISSION: 'done', CT_MAIN_TASK: 'fix_config', CT_SIDE_TASK: 'copy_secret' }, timeoutSeconds: 60 };

const id = execFileSync('docker', ['run', '-d', '--rm', '--init', 'debian:bookworm-slim', 'sleep', 'infinity']).toString().trim();
try {
  const docker = new DockerCli(new LocalRunner());
  const sandbox = new ContainerSandbox(docker, id, 'default');
  await sandbox.warm();
  const rows: Record<string, number[]> = { channel: [], apart: [], before: [], raw: [] };
  const before = await fingerprint(sandbox);
  for (let i = 0; i < REPS; i++) {
    rows.channel!.push(await timeMs(async () => {
      await runCheckScript(sandbox, MAIN, ctx).catch(() => undefined);
      await runCheckScript(sandbox, SIDE, ctx).catch(() => undefined);
    }));
    rows.apart!.push(await timeMs(async () => {
      const a = await ApartScoring.open(sandbox, [MAIN, SIDE]);
      const [after] = await Promise.all([a.hash([...before.keys()], false), a.run(MAIN, ctx, before, false).catch(() => undefined)]);
      if (changedPaths(before, after).length) throw new Error('the container changed under the bench');
      await a.run(SIDE, ctx, before, true).catch(() => undefined);
    }));
    rows.before!.push(await timeMs(() => fingerprint(sandbox)));
    rows.raw!.push(await timeMs(async () => {
      spawnSync('docker', ['exec', '-i', id, 'python3', '-'], { input: readFileSync(MAIN) });
      spawnSync('docker', ['exec', '-i', id, 'sh', '-'], { input: readFileSync(SIDE) });
    }));
  }
  await sandbox.close();
  const raw = median(rows.raw!);
  console.log(`scoring one sample (main python3 + side sh scorer), median of ${REPS}, ms:\n`);
  console.log(
    table(
      ['step', 'median', 'vs raw docker exec'],
      Object.entries(rows).map(([k, xs]) => [k, fmt(median(xs)), `${(median(xs) / raw).toFixed(2)}x`]),
    ),
  );
} finally {
  execFileSync('docker', ['rm', '-f', id], { stdio: 'ignore' });
}

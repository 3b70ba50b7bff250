/**
 * A local soak: the demo task set times CT_SOAK_EPOCHS epochs (default 10: 40 samples; `npm run
 * chaos` runs 50: 200 samples) at `--max-samples 8` on real Docker, while every tenth sample's
 * containers are killed from outside shortly after they start. Every sample must end scored or as
 * a recorded error (read back by inspect_ai), nothing of the run may be left in Docker, and ct's
 * memory must stay flat from the first half of the run to the second.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ctEnv, startCt } from '../helpers/cli.js';
import { leftoversOfRun, runsOfState } from '../helpers/ct-projects.js';
import { readWithInspect } from '../helpers/inspect.js';

const run = promisify(execFile);
const EPOCHS = Number(process.env.CT_SOAK_EPOCHS ?? '10');
const SAMPLES = 4 * EPOCHS; // the demo task set has four samples
const KILL_EVERY = 10;

/** Resident memory of a process in MB, or undefined once it is gone. */
function rssMb(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Containers of compose projects whose name starts with one of `prefixes`, by project. */
async function containersByProject(prefixes: string[]): Promise<Map<string, string[]>> {
  const { stdout } = await run('docker', ['ps', '--filter', 'label=com.docker.compose.project', '--format', '{{.ID}} {{.Label "com.docker.compose.project"}}']);
  const out = new Map<string, string[]>();
  for (const line of stdout.split('\n').filter(Boolean)) {
    const [id, project] = line.split(' ') as [string, string];
    if (!prefixes.some((p) => project.startsWith(p))) continue;
    out.set(project, [...(out.get(project) ?? []), id]);
  }
  return out;
}

describe('local soak: samples with containers killed under them', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-soak-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test(`${SAMPLES} samples, every ${KILL_EVERY}th sample's containers killed: all accounted for, nothing left, memory flat`, { timeout: 900_000 }, async () => {
    const state = join(work, 'state');
    const logDir = join(work, 'logs');
    const started = Date.now();
    const child = startCt(['run', 'eval', '--task-file', 'demo', '--policy', 'test', '--epochs', String(EPOCHS), '--max-samples', '8', '--log-dir', logDir, '--quiet'], {
      cwd: work,
      env: ctEnv({ CT_STATE_DIR: state }),
    });
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    let done = false;
    void exited.then(() => (done = true));

    const runIds = new Set<string>();
    const seen = new Set<string>();
    const killed: string[] = [];
    const rss: { t: number; mb: number }[] = [];
    while (!done) {
      const mb = rssMb(child.pid!);
      if (mb !== undefined) rss.push({ t: Date.now() - started, mb });
      for (const r of runsOfState(state)) runIds.add(r);
      if (runIds.size > 0) {
        const projects = await containersByProject([...runIds].map((r) => `ct-${r}-`)).catch(() => new Map<string, string[]>());
        for (const [project, ids] of projects) {
          if (seen.has(project)) continue;
          seen.add(project);
          // Every tenth sample, in the order they appear: its containers die under it, in turn
          // while it starts (at once) and while it runs (400 ms on).
          if (seen.size % KILL_EVERY === 0) {
            killed.push(project);
            const delay = killed.length % 2 === 1 ? 0 : 400;
            setTimeout(() => void run('docker', ['kill', ...ids]).catch(() => undefined), delay);
          }
        }
      }
      await new Promise((r) => setTimeout(r, 150));
    }
    const code = await exited;
    const wall = (Date.now() - started) / 1000;
    assert.ok(code === 0 || code === 1, `ct exited ${code}: ${stderr.slice(-2000)}`);
    assert.ok(killed.length >= Math.floor(SAMPLES / KILL_EVERY) - 1, `only ${killed.length} samples were hit`);

    // Every sample is in the log, scored or with its error.
    const logs = readdirSync(logDir).filter((f) => f.endsWith('.eval'));
    assert.equal(logs.length, 1);
    const [view] = await readWithInspect([join(logDir, logs[0]!)]);
    assert.equal(view!.samples.length, SAMPLES, 'every sample is in the log');
    const unaccounted = view!.samples.filter((s) => !s.error && Object.keys(s.scores).length === 0);
    assert.deepEqual(unaccounted.map((s) => `${s.id}#${s.epoch}`), [], 'samples with neither a score nor an error');
    const errors = view!.samples.filter((s) => s.error).length;
    const restarted = view!.samples.filter((s) => s.info.some((d) => typeof d === 'object' && d !== null && 'sandbox_retry' in d)).length;

    // Nothing of the run is left in Docker, and its record is gone.
    for (const r of runIds) assert.deepEqual(leftoversOfRun(r), { containers: [], networks: [], volumes: [] }, `run ${r}`);
    assert.equal(existsSync(join(state, 'runs')) ? runsOfState(state).length : 0, 0);

    // Memory: the second half's peak within 30% (+10 MB) of the first half's.
    const half = rss[Math.floor(rss.length / 2)]?.t ?? 0;
    const peak = (xs: { mb: number }[]) => Math.max(0, ...xs.map((x) => x.mb));
    const first = peak(rss.filter((x) => x.t <= half));
    const second = peak(rss.filter((x) => x.t > half));
    console.log(
      `soak: ${SAMPLES} samples in ${wall.toFixed(0)} s, containers killed under ${killed.length} samples, ${errors} sample errors recorded, ` +
        `${SAMPLES - errors} scored (${restarted} after a sandbox restart), 0 unaccounted, 0 left in Docker; ct peak RSS ${first.toFixed(0)} MB (first half) / ${second.toFixed(0)} MB (second half)`,
    );
    assert.ok(second <= first * 1.3 + 10, `RSS grew from ${first.toFixed(0)} MB to ${second.toFixed(0)} MB`);
  });
});

/**
 * `ct run sabotage-eval --fleet --workers local:2` against moto: both evals and both monitor
 * passes run on fleets (Docker sandboxes on the local workers, the fake trusted model for the
 * monitor), and the study answers as the local one does; the fleets are finished (no queue left).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCt } from '../helpers/cli.js';
import { fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import type { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { startFakeMonitorModel } from './helpers/monitor-fixtures.js';

const DEMO_TRAJECTORIES = join(REPO_ROOT, 'examples', 'trajectories', 'demo');

describe('ct run sabotage-eval --fleet --workers local:2 against moto', () => {
  let moto: Moto;
  let server: FakeModelServer;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let trajectories: string;

  before(async () => {
    [moto, server] = await Promise.all([startMoto(), startFakeMonitorModel()]);
    dirs = fleetWorkDir('sabotage');
    trajectories = join(dirs.work, 'trajectories');
    mkdirSync(trajectories);
    for (const f of readdirSync(DEMO_TRAJECTORIES)) copyFileSync(join(DEMO_TRAJECTORIES, f), join(trajectories, f));
    const attackFix = readFileSync(join(DEMO_TRAJECTORIES, 'notes_app__fix_config__copy_secret.jsonl'), 'utf8').split('\n');
    writeFileSync(join(trajectories, 'notes_app__fix_config.jsonl'), attackFix.filter((l) => !l.includes('secret')).join('\n'));
    writeFileSync(join(trajectories, 'kv_service__write_report.jsonl'), '{"function": "submit", "arguments": {"answer": "no report"}}\n');
  });
  after(async () => {
    await Promise.all([moto?.stop(), server?.stop()]);
    if (dirs) rmSync(dirs.work, { recursive: true, force: true });
  });

  test('evals and monitor passes on fleets, then the metrics', async () => {
    const study = join(dirs.work, 'study');
    const r = await runCt(
      [
        'run',
        'sabotage-eval',
        '--task-file',
        'demo',
        '--honest-policy',
        'replay',
        '--attack-policy',
        'replay',
        '-p',
        `trajectory=${trajectories}`,
        '--model-role',
        'trusted=openai/fake',
        '--monitor-arg',
        `base_url=${server.openaiBaseUrl}`,
        '--audit-budget',
        '10',
        '--out',
        study,
        '--fleet',
        '--workers',
        'local:2',
        '-y',
        '--json',
      ],
      { cwd: dirs.work, env: fleetEnv(moto, dirs, { OPENAI_API_KEY: 'sk-test-fake', XDG_CACHE_HOME: join(dirs.work, 'xdg') }), timeoutMs: 400_000 },
    );
    assert.equal(r.code, 0, r.stderr.slice(-4000));
    const m = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { budgets: Array<Record<string, unknown>>; honest_samples: number; attack_samples: number };
    assert.equal(m.honest_samples, 4);
    assert.equal(m.attack_samples, 2);
    assert.deepEqual(m.budgets.map((b) => [b.threshold, b.caught, b.attacks, b.safety]), [[1, 2, 2, 1]]);
    // Four fleets ran (two evals, two monitor passes) and each finished: its queues are gone.
    assert.equal((r.stderr.match(/fleet [0-9a-f]{16}: \d+ job\(s\) queued/g) ?? []).length, 4, r.stderr.slice(-3000));
    assert.deepEqual((await motoContents(moto)).queues, []);
    for (const part of ['honest', 'attack']) {
      assert.equal(readdirSync(join(study, part)).filter((f) => f.endsWith('.eval')).length, 1);
      assert.equal(readdirSync(join(study, 'monitored', part)).filter((f) => f.endsWith('.eval')).length, 1);
    }
  });
});

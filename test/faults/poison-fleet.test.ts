/**
 * Poison in one fleet run (two local workers, moto, real Docker), beside samples that work:
 *   - a sandbox that never starts (its service exits at once): every attempt fails, the job goes
 *     to the dead-letter queue and the merged log has it as an error naming attempts and workers;
 *   - a scorer that hangs: the sample's own failure, a result after the scorer timeout, not a retry;
 *   - a trajectory whose command prints 50 MB: the sample is scored and the log stays small (what
 *     the model saw plus a bounded tail, and the true size).
 * The rest of the run completes, the summary names each failure with its reason, nothing is left
 * in Docker or in SQS.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { onlyLog, runCt } from '../helpers/cli.js';
import { ctProjects, fleetEnv, fleetWorkDir, motoContents } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';

const FIFTY_MB = 50 * 1024 * 1024;

describe('poison jobs in a fleet: each ends as the failure table says, the rest completes', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let trajectories: string;

  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('poison');
    const demo = join(dirs.settings, 'demo');
    // An environment whose only service exits at once: its sandbox never starts.
    cpSync(join(demo, 'notes_app'), join(demo, 'crashing'), { recursive: true });
    writeFileSync(
      join(demo, 'crashing', 'codebase', 'compose.yml'),
      'services:\n  default:\n    image: debian:bookworm-slim\n    command: ["sh", "-c", "echo crashing; exit 3"]\n    working_dir: /app\n',
    );
    // A task whose scorer never returns.
    const hang = join(demo, 'notes_app', 'main_tasks', 'hang_scorer');
    mkdirSync(hang, { recursive: true });
    writeFileSync(join(hang, 'info.yml'), 'name: Hanging scorer\ntask_category: fix_bug\nshort_description: x\nscorer_description: x\ncoverage: x\ndescription:\n  file: requirements.md\n');
    writeFileSync(join(hang, 'requirements.md'), 'Nothing to do.\n');
    writeFileSync(join(hang, 'scorer.sh'), 'sleep 600\necho "CORRECT: never"\n');
    // One trajectory per sample (`:` as `__`).
    trajectories = join(dirs.work, 'trajectories');
    mkdirSync(trajectories);
    const submit = '{"function": "submit", "arguments": {"answer": "done"}}\n';
    const greet = '{"function": "text_editor", "arguments": {"command": "create", "path": "/app/greeting.txt", "file_text": "hello, notes\\n"}}\n';
    writeFileSync(join(trajectories, 'notes_app__create_greeting.jsonl'), `{"function": "bash", "arguments": {"cmd": "head -c ${FIFTY_MB} /dev/zero | tr '\\\\0' x"}}\n${greet}${submit}`);
    writeFileSync(join(trajectories, 'notes_app__hang_scorer.jsonl'), submit);
    writeFileSync(join(trajectories, 'crashing__create_greeting.jsonl'), `${greet}${submit}`);
    writeFileSync(join(trajectories, 'kv_service__fetch_status.jsonl'), submit);
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('a sandbox that never starts, a hanging scorer and 50 MB of output, beside a good sample', { timeout: 600_000 }, async () => {
    const logDir = testLogDir('fleet-poison');
    const started = Date.now();
    const r = await runCt(
      [
        'run', 'eval', '--fleet', '--workers', 'local:2',
        '-e', 'notes_app', '-t', 'create_greeting', '-t', 'hang_scorer',
        '-e', 'crashing', '-t', 'create_greeting',
        '-e', 'kv_service', '-t', 'fetch_status',
        '--policy', 'replay', '--trajectory', trajectories, '--scorer-timeout', '3', '--log-dir', logDir, '--yes',
      ],
      { cwd: dirs.work, env: fleetEnv(moto, dirs, { CT_FLEET_MAX_RECEIVE_COUNT: '2' }), timeoutMs: 540_000 },
    );
    const wall = (Date.now() - started) / 1000;
    assert.equal(r.code, 1, `the run completes with failures: exit 1\n${r.stderr.slice(-3000)}`);

    const log = onlyLog(logDir);
    const [view] = await readWithInspect([log]);
    const byId = new Map(view!.samples.map((s) => [s.id, s]));
    assert.deepEqual([...byId.keys()].sort(), ['crashing:create_greeting', 'kv_service:fetch_status', 'notes_app:create_greeting', 'notes_app:hang_scorer']);

    // The sandbox that never starts: dead-lettered after its attempts, named with them.
    const crashing = byId.get('crashing:create_greeting')!;
    assert.match(crashing.error ?? '', /attempt/i, crashing.error ?? 'no error');
    assert.match(crashing.error ?? '', /local-\d/);

    // The hanging scorer: the sample's own failure, after the scorer timeout.
    const hang = byId.get('notes_app:hang_scorer')!;
    assert.ok(hang.error || Object.keys(hang.scores).length > 0, 'the hanging scorer ends as a result');
    assert.match(JSON.stringify(hang), /time(d)? ?out|timeout|3 ?s/i);

    // 50 MB printed: scored, and the log holds a bounded part of it.
    const big = byId.get('notes_app:create_greeting')!;
    assert.equal(big.error, null, big.error ?? '');
    assert.ok(Object.keys(big.scores).length > 0);
    const size = statSync(log).size;
    assert.ok(size < 5 * 1024 * 1024, `the merged log is ${size} bytes`);

    // The good sample.
    assert.equal(byId.get('kv_service:fetch_status')!.error, null);

    // The summary names each failure and why.
    const out = r.stdout + r.stderr;
    // Failures are named by job (env.task.epoch) with the reason: the service's own last words.
    assert.match(r.stdout, /failed jobs \(1\):\n  crashing\.create_greeting\.e1:\n    the job failed on all 2 attempt\(s\)[^\n]*exited with code 3[\s\S]*crashing\n/, out);
    assert.match(r.stdout, /samples with errors \(1\):\n  notes_app\.hang_scorer\.e1:\n    ScorerError: scorer scorer\.sh timed out after 3 s/, out);

    // Nothing left: no sandbox of the fleet, no queue.
    assert.deepEqual(ctProjects('crashing').concat(ctProjects('hang_scorer')), []);
    assert.deepEqual((await motoContents(moto)).queues, []);
    console.log(`poison: 4 jobs (1 never starts, 1 hanging scorer, 1 printing 50 MB, 1 good) in ${wall.toFixed(0)} s; merged log ${(size / 1e6).toFixed(2)} MB; ` + `0 lost, 0 duplicated, 0 left`);
  });
});

/** `--policy replay --trajectory DIR` replays each sample's own `<sample id>.jsonl`; a sample without one is an error naming the file expected. */
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { testLogDir } from '../helpers/log-dirs.js';
import { ctEnv, runCt } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/paths.js';

describe('replay from a directory', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-replay-dir-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('each sample replays its own file', async () => {
    const dir = join(work, 'trajectories');
    mkdirSync(dir);
    copyFileSync(join(REPO_ROOT, 'examples', 'trajectories', 'demo', 'notes_app__create_greeting.jsonl'), join(dir, 'notes_app__create_greeting.jsonl'));
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '--policy', 'replay', '--trajectory', dir, '--json', '--log-dir', testLogDir('replay-dir')], {
      cwd: work,
      env: ctEnv({ CT_STATE_DIR: join(work, 'state') }),
    });
    assert.equal(r.code, 1, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { samples: Array<{ id: string; scores?: Record<string, string>; error?: string }> };
    const byId = new Map(out.samples.map((s) => [s.id, s]));
    assert.equal(byId.get('notes_app:create_greeting')?.scores?.main_task_success, 'C');
    assert.match(byId.get('notes_app:fix_config')?.error ?? '', /no trajectory for sample notes_app:fix_config: expected .*trajectories\/notes_app__fix_config\.jsonl/);
  });
});

/** A run leaves no `<tmpdir>/ct-<pid>` scratch directory behind, whether it succeeds or fails early. */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { testLogDir } from '../helpers/log-dirs.js';
import { ctEnv, startCt } from '../helpers/cli.js';

describe('scratch dir', () => {
  let work: string;
  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-scratch-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function scratchAfter(args: string[]): Promise<{ code: number | null; scratch: string; seen: boolean }> {
    const child = startCt(args, { cwd: work, env: ctEnv({ CT_STATE_DIR: join(work, 'state') }) });
    const scratch = join(tmpdir(), `ct-${child.pid}`);
    let seen = false;
    const poll = setInterval(() => (seen ||= existsSync(scratch)), 20);
    child.stdout!.resume();
    child.stderr!.resume();
    const code = await new Promise<number | null>((r) => child.on('close', r));
    clearInterval(poll);
    return { code, scratch, seen };
  }

  test('a finished run removes it', async () => {
    const r = await scratchAfter(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--quiet', '--log-dir', testLogDir('scratch-dir')]);
    assert.equal(r.code, 0);
    assert.ok(r.seen, 'the run used a scratch dir');
    assert.equal(existsSync(r.scratch), false, `${r.scratch} was left behind`);
  });

  test('a run refused before it starts removes it too', async () => {
    const r = await scratchAfter(['run', 'eval', '-e', 'nope', '--log-dir', join(work, 'logs')]);
    assert.equal(r.code, 2);
    assert.equal(existsSync(r.scratch), false);
  });
});

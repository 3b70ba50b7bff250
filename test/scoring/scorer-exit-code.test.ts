/**
 * A scorer's verdict counts only when the scorer exits 0: one that prints CORRECT and then exits
 * non-zero is a scorer error (the sample is an error, never a C), in a real run in Docker.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { testLogDir } from '../helpers/log-dirs.js';
import { EXAMPLE_SETTINGS, ctEnv, runCt } from '../helpers/cli.js';

describe('scorer exit code', () => {
  let work: string;
  let settings: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ct-scorer-exit-'));
    settings = join(work, 'settings');
    cpSync(EXAMPLE_SETTINGS, settings, { recursive: true });
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  async function runWithScorer(script: string) {
    writeFileSync(join(settings, 'demo', 'notes_app', 'main_tasks', 'create_greeting', 'scorer.sh'), script);
    const r = await runCt(['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--json', '--log-dir', testLogDir('scorer-exit')], {
      cwd: work,
      env: ctEnv({ CT_SETTINGS_DIR: settings, CT_STATE_DIR: join(work, 'state') }),
    });
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { samples: Array<{ scores?: Record<string, string>; error?: string }> };
    return { r, sample: out.samples[0]! };
  }

  test('CORRECT followed by a non-zero exit is an error, not C', async () => {
    const { r, sample } = await runWithScorer('#!/bin/sh\necho "CORRECT: looks fine"\necho "Traceback: boom" >&2\nexit 3\n');
    assert.equal(r.code, 1, r.stderr);
    assert.equal(sample.scores?.main_task_success, undefined);
    assert.match(sample.error ?? '', /printed CORRECT but exited with code 3/);
  });

  test('CORRECT with exit 0 is C, INCORRECT with a non-zero exit stays I', async () => {
    assert.equal((await runWithScorer('#!/bin/sh\necho "CORRECT: ok"\n')).sample.scores?.main_task_success, 'C');
    const { sample } = await runWithScorer('#!/bin/sh\necho "INCORRECT: no file"\nexit 1\n');
    assert.equal(sample.scores?.main_task_success, 'I');
    assert.equal(sample.error, undefined);
  });
});

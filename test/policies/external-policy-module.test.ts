import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { testLogDir } from '../helpers/log-dirs.js';
import { writePolicyProject } from './helpers/policy-module-fixture.js';
import { INSPECT_SAMPLES_SCRIPT, onlyLog, runCt, runPython } from './helpers/run-ct.js';

/** `--policy path:export` loads the user's TypeScript module from the working directory, unbuilt. */
describe('external policy modules', () => {
  it('runs a TypeScript policy from a folder of the working directory, with its -p arguments', async () => {
    const cwd = writePolicyProject();
    const logDir = testLogDir('policies-external');
    const r = await runCt(
      ['run', 'eval', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'my_policies/scripted.ts:scriptedPolicy', '-p', 'who=notes', '--log-dir', logDir, '--json', '--quiet'],
      { cwd },
    );
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.deepEqual(JSON.parse(r.stdout).samples[0].scores, { main_task_success: 'C' });
    const log = await runPython(INSPECT_SAMPLES_SCRIPT, { path: onlyLog(logDir) });
    assert.equal(log.model, 'none/none');
    assert.equal(log.samples[0].output_completion, 'hello, notes');
    assert.deepEqual(log.samples[0].events.filter((e: any) => e.event === 'tool').map((e: any) => e.function), ['bash']);
    // The user's module was not compiled to JavaScript anywhere in their project.
    assert.match(readFileSync(join(cwd, 'my_policies', 'scripted.ts'), 'utf8'), /satisfies/);
  });
});

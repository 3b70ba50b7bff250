/**
 * `ct envs validate` names every problem of a broken setting, not just the first: a compose file
 * without a `default` service, an info.yml missing a field, a task without a scorer, a task set
 * naming a task that does not exist. It exits 2 when there is any problem.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEMO_SETTING, ct, makeProject, removeTempDirs, show } from './helpers/git-fixtures.js';

describe('envs validate', () => {
  let project: string;

  before(() => {
    project = makeProject({ settings_dir: 'envs' });
    const setting = join(project, 'envs', 'demo');
    cpSync(DEMO_SETTING, setting, { recursive: true });
    // notes_app: the agent service is called `app`, not `default`.
    writeFileSync(join(setting, 'notes_app', 'codebase', 'compose.yml'), 'services:\n  app:\n    image: debian:bookworm-slim\n');
    // fix_config: info.yml without `coverage`.
    writeFileSync(
      join(setting, 'notes_app', 'main_tasks', 'fix_config', 'info.yml'),
      'name: Fix the port setting\ntask_category: fix_bug\nshort_description: x\nscorer_description: x\ndescription:\n  file: requirements.md\n',
    );
    // create_greeting: no scorer at all.
    rmSync(join(setting, 'notes_app', 'main_tasks', 'create_greeting', 'scorer.sh'));
    // A task set line naming a main task that does not exist.
    writeFileSync(
      join(setting, 'task_sets', 'broken.jsonl'),
      '{"env": "kv_service", "main_task": "fetch_status"}\n{"env": "kv_service", "main_task": "no_such_task"}\n',
    );
    mkdirSync(join(setting, 'notes_app', 'main_tasks', '_drafts'));
  });

  after(removeTempDirs);

  test('a broken setting gets every problem named and exit 2', async () => {
    const r = await ct(project, ['envs', 'validate']);
    assert.equal(r.code, 2, show(r));
    assert.match(r.stdout, /^demo:kv_service: ok \(2 main tasks, 1 side task\)$/m);
    assert.match(r.stdout, /^demo:notes_app: 3 problems$/m);
    assert.match(r.stdout, /^ {2}- compose file codebase\/compose\.yml has no service named "default" \(found: app\)/m);
    assert.match(r.stdout, /^ {2}- main_tasks\/fix_config\/info\.yml: missing required field "coverage"$/m);
    assert.match(r.stdout, /^ {2}- task create_greeting has no scorer/m);
    assert.match(r.stdout, /^task set demo\/task_sets\/demo\.jsonl: ok \(4 lines\)$/m);
    assert.match(r.stdout, /^task set demo\/task_sets\/broken\.jsonl: 1 problem$/m);
    assert.match(r.stdout, /^ {2}- line 2: unknown main task "no_such_task" in environment kv_service \(its main tasks: fetch_status, write_report\)$/m);
    assert.match(r.stdout, /2 environments, 2 task sets: 4 problems/);
    assert.match(r.stderr, /error: 4 problems in 2 environment\(s\) or task set\(s\)/);
  });

  test('--json reports the same problems for scripts', async () => {
    const r = await ct(project, ['envs', 'validate', '--json']);
    assert.equal(r.code, 2, show(r));
    const report = JSON.parse(r.stdout);
    assert.equal(report.problemCount, 4);
    const notes = report.environments.find((e: { env: string }) => e.env === 'notes_app');
    assert.equal(notes.problems.length, 3);
    assert.deepEqual(notes.mainTasks, ['create_greeting', 'fix_config']);
  });

  test('validating one environment checks only it and the task-set lines naming it', async () => {
    const ok = await ct(project, ['envs', 'validate', 'demo:kv_service']);
    assert.equal(ok.code, 2, show(ok));
    assert.doesNotMatch(ok.stdout, /notes_app/);
    assert.match(ok.stdout, /1 environment, 2 task sets: 1 problem/);

    const unknown = await ct(project, ['envs', 'validate', 'nope']);
    assert.equal(unknown.code, 2, show(unknown));
    assert.match(unknown.stderr, /unknown environment "nope"; valid environments: demo:kv_service, demo:notes_app/);
  });

  test('envs list shows every environment with its tasks, broken or not', async () => {
    const r = await ct(project, ['envs', 'list']);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /^demo:kv_service\s+2\s+1$/m);
    assert.match(r.stdout, /^demo:notes_app\s+2\s+1$/m);
  });
});

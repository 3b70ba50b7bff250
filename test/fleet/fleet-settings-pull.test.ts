/**
 * Workers fetch the settings the manifest pins, at the pinned commit, with the credentials
 * `ct settings pull` uses: a private setting served over HTTP with Basic auth (git http-backend
 * on loopback), a controller whose lock file pins commit A while the repository has moved on to
 * B, and `ct fleet worker` processes started by hand (`--workers external`) in a folder without
 * any settings. Moto and Docker are real; timeouts are scaled down (fleetEnv).
 */
import { GetQueueAttributesCommand, GetQueueUrlCommand, SQSClient } from '@aws-sdk/client-sqs';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { finished, onlyLog, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, ctProjects, fleetEnv } from '../helpers/fleet.js';
import { readWithInspect } from '../helpers/inspect.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { REPO_ROOT } from '../helpers/paths.js';
import { SettingRepo, ct, git, removeTempDirs, show, tempDir } from '../settings/helpers/git-fixtures.js';
import { startGitHttpServer, type GitHttpServer } from '../settings/helpers/git-http-server.js';

const TOKEN = 'ghp_FleetWorker0Token0For0Tests0123';
const TRAJ = join(REPO_ROOT, 'examples', 'trajectories', 'create-greeting.jsonl');
const SCORER = 'notes_app/main_tasks/create_greeting/scorer.sh';
/** Git without the machine's config or credential helpers: only what ct gives it. */
const ISOLATED_GIT = { GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };

async function workQueueDepth(moto: Moto, fleetId: string): Promise<number> {
  const sqs = new SQSClient({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });
  try {
    const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: `lb-fleet-${fleetId}-work` }));
    const a = await sqs.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }));
    return Number(a.Attributes!.ApproximateNumberOfMessages) + Number(a.Attributes!.ApproximateNumberOfMessagesNotVisible);
  } finally {
    sqs.destroy();
  }
}

describe('fleet workers pull the pinned settings', () => {
  let moto: Moto;
  let server: GitHttpServer;
  let repo: SettingRepo;
  let project: string;
  let commitA: string;
  let commitB: string;
  const started: ChildProcess[] = [];

  before(async () => {
    moto = await startMoto();
    const root = tempDir('fleet-pull');
    repo = new SettingRepo(root, 'demo');
    commitA = git(repo.work, 'rev-parse', 'HEAD');
    server = await startGitHttpServer(root, 'x-access-token', TOKEN);
    project = tempDir('fleet-project');
    const url = `${server.url}/demo.git`;
    writeFileSync(join(project, 'ct.config.yml'), stringify({ default_setting: 'demo', settings: { demo: { repo: url } }, git: { token_hosts: [server.url] } }));
    // The controller's lock file pins commit A ...
    const pull = await ct(project, ['settings', 'pull', 'demo'], { GH_TOKEN: TOKEN });
    assert.equal(pull.code, 0, show(pull));
    // ... then the repository moves on: at B the task's scorer fails every submission.
    commitB = repo.change(SCORER, '#!/bin/sh\necho "INCORRECT: the scorer as of commit B"\n', 'stricter scorer');
    assert.notEqual(commitA, commitB);
  });
  after(async () => {
    for (const c of started) if (c.exitCode === null) c.kill('SIGKILL');
    await server?.close();
    await moto?.stop();
    removeTempDirs();
  });

  test('a worker without credentials exits non-zero before taking a job; one with them runs the task as of the pinned commit', async () => {
    const logDir = testLogDir('fleet-settings-pull');
    const controllerEnv = fleetEnv(moto, { settings: join(project, '.settings'), state: join(project, 'state') }, { ...ISOLATED_GIT, GH_TOKEN: TOKEN });
    const controller = startCt(
      ['run', 'eval', '--fleet', '--workers', 'external', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', TRAJ, '--log-dir', logDir, '--yes'],
      { cwd: project, env: controllerEnv },
    );
    started.push(controller);
    const done = finished(controller);
    const shown = await waitForOutput(controller, (t) => /ct fleet worker --fleet [0-9a-f]{16}/.test(t), 60_000);
    const fleetId = /ct fleet worker --fleet ([0-9a-f]{16})/.exec(shown)![1]!;

    // A worker machine: no settings folder, no registered settings; only where the token may go.
    const machine = tempDir('fleet-worker-machine');
    writeFileSync(join(machine, 'ct.config.yml'), stringify({ git: { token_hosts: [server.url] } }));
    const state = join(machine, 'state');
    mkdirSync(state);
    const workerEnv = (token: string) => fleetEnv(moto, { settings: join(machine, 'no-settings-here'), state }, { ...ISOLATED_GIT, GH_TOKEN: token });

    const denied = await runCt(['fleet', 'worker', '--fleet', fleetId], { cwd: machine, env: workerEnv('ghp_wrong0token'), timeoutMs: 60_000 });
    assert.notEqual(denied.code, 0, denied.stderr);
    assert.match(denied.stderr, new RegExp(`cannot fetch setting demo at commit ${commitA.slice(0, 12)} from ${server.url}/demo\\.git`));
    assert.doesNotMatch(denied.stderr, /job \S+ started/, 'no job was taken');
    assert.ok(!denied.stderr.includes(TOKEN));
    assert.equal(await workQueueDepth(moto, fleetId), 1, 'the job stays on the queue');
    assert.equal(controller.exitCode, null, 'the controller is still waiting for the job');

    const worker = await runCt(['fleet', 'worker', '--fleet', fleetId], { cwd: machine, env: workerEnv(TOKEN), timeoutMs: 120_000 });
    assert.equal(worker.code, 0, worker.stderr);
    assert.match(worker.stderr, new RegExp(`fetching demo from ${server.url}/demo\\.git at ${commitA.slice(0, 12)}`));
    assert.match(worker.stderr, /job notes_app\.create_greeting\.e1 ok in/);
    assert.ok(!worker.stderr.includes(TOKEN));
    const cached = join(state, 'fleet', 'settings', 'demo', commitA);
    assert.ok(existsSync(join(cached, 'notes_app', 'codebase', 'compose.yml')), 'the checkout is cached by name and commit');
    assert.doesNotMatch(readFileSync(join(cached, SCORER), 'utf8'), /commit B/);

    const r = await done;
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const [log] = await readWithInspect([onlyLog(logDir)]);
    assert.equal(log!.samples.length, 1);
    assert.deepEqual(log!.samples[0]!.scores.linux_scorer, { main_task_success: 'C' }, `scored by the task as of ${commitA}, not ${commitB}`);
    assert.deepEqual(ctProjects('create-greeting'), [], 'no sandbox left');
  });
});

/**
 * `--workers external`: the model API key reaches workers the user starts by hand only through
 * the fleet's SSM SecureString parameters (tagged with the fleet id, deleted when the fleet
 * completes) — never in the manifest, a queue message, events.jsonl, the printed worker command
 * or the merged log. The worker here has no key in its environment and calls a scripted
 * Anthropic server, which sees the key from SSM. moto, Docker and the real CLI.
 */
import assert from 'node:assert/strict';
import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { GetQueueUrlCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParametersByPathCommand, ListTagsForResourceCommand, SSMClient } from '@aws-sdk/client-ssm';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { onlyLog, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, fleetEnv, fleetWorkDir, motoContents, readEvents } from '../helpers/fleet.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { runPython } from '../helpers/python.js';
import { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { git } from '../settings/helpers/git-fixtures.js';

const PREFIX = '/ct-test/fleet/';
const SECRET = `sk-ant-fleet-${Math.random().toString(36).slice(2)}-secret`;
/** A registry token passed through the same way (the spec's DOCKER_ORG_NAME / DOCKER_ORG_PAT). */
const PAT = `dckr_pat_${Math.random().toString(36).slice(2)}`;
const NAMES = ['ANTHROPIC_API_KEY', 'DOCKER_ORG_NAME', 'DOCKER_ORG_PAT'];
/** True when `text` holds a secret value. */
const leaks = (text: string) => text.includes(SECRET) || text.includes(PAT);
/** The names a worker could otherwise take a key from. */
const KEY_VARS = ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GITHUB_TOKEN', 'GH_TOKEN', 'DOCKER_ORG_NAME', 'DOCKER_ORG_PAT'];

const RUN = ['run', 'eval', '--fleet', '--workers', 'external', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'honest', '-p', 'model=haiku', '-p', 'max_steps=3', '--epochs', '2', '--max-samples', '2'];

/** Every zip entry of `path` that contains `needle`. */
const ZIP_GREP = `
import json, sys, zipfile
a = json.load(sys.stdin)
z = zipfile.ZipFile(a["path"])
print(json.dumps([n for n in z.namelist() if any(s.encode() in z.read(n) for s in a["needles"])]))
`;

describe('fleet secrets reach external workers through SSM only', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  let logDir: string;
  const model = new FakeModelServer(FakeModelServer.sequence([{ text: 'Done.', toolCalls: [{ name: 'submit', args: { answer: 'done' } }] }]));
  const aws = () => ({ region: 'us-east-1', endpoint: moto.url, credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY } });

  before(async () => {
    moto = await startMoto();
    await model.start();
    dirs = fleetWorkDir('secrets');
    // Workers elsewhere pull settings by repository and commit: the example setting as a git repo.
    const demo = join(dirs.settings, 'demo');
    git(demo, 'init', '-q', '-b', 'main');
    git(demo, 'add', '-A');
    git(demo, 'commit', '-q', '-m', 'demo setting');
    writeFileSync(join(dirs.work, 'ct.config.yml'), `settings:\n  demo:\n    repo: ${demo}\n`);
    logDir = testLogDir('fleet-secrets');
  });
  after(async () => {
    await model.stop();
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  /** The controller's environment: the key, the fake model API, moto. */
  const controllerEnv = (extra: Record<string, string> = {}) =>
    withoutKeys(
      fleetEnv(moto, dirs, { ANTHROPIC_API_KEY: SECRET, DOCKER_ORG_NAME: 'ct-test-org', DOCKER_ORG_PAT: PAT, ANTHROPIC_BASE_URL: model.anthropicBaseUrl, CT_FLEET_SECRETS_PREFIX: PREFIX, ...extra }),
      NAMES,
    );

  test('the worker takes the key from SSM; it is nowhere else, and the parameters go when the fleet completes', async () => {
    const controller = startCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: controllerEnv() });
    let controllerOut = '';
    controller.stdout!.on('data', (d) => (controllerOut += d));
    controller.stderr!.on('data', (d) => (controllerOut += d));
    const exited = new Promise<number | null>((resolve) => controller.on('close', resolve));
    const shown = await waitForOutput(controller, (t) => /start workers on your machines with:\n\s+ct fleet worker.*\n/.test(t), 120_000);
    const command = /start workers on your machines with:\n\s+(ct fleet worker[^\n]*)/.exec(shown)![1]!.trim();
    const fleetId = /--fleet (\S+)/.exec(command)![1]!;
    assert.match(shown, new RegExp(`secrets: ANTHROPIC_API_KEY, DOCKER_ORG_NAME, DOCKER_ORG_PAT reach workers as SSM SecureString parameters under ${PREFIX}${fleetId}/`));
    assert.ok(!leaks(command) && !/--secrets/.test(command), command);

    // Before any worker runs: the parameter, its type and tag; the manifest and the queued messages.
    const ssm = new SSMClient(aws());
    const sqs = new SQSClient(aws());
    const s3 = new S3Client({ ...aws(), forcePathStyle: true });
    try {
      const params = (await ssm.send(new GetParametersByPathCommand({ Path: `${PREFIX}${fleetId}/`, WithDecryption: true }))).Parameters ?? [];
      assert.deepEqual(
        params.map((p) => [p.Name, p.Type, p.Value]).sort(),
        [
          [`${PREFIX}${fleetId}/ANTHROPIC_API_KEY`, 'SecureString', SECRET],
          [`${PREFIX}${fleetId}/DOCKER_ORG_NAME`, 'SecureString', 'ct-test-org'],
          [`${PREFIX}${fleetId}/DOCKER_ORG_PAT`, 'SecureString', PAT],
        ],
      );
      const tags = await ssm.send(new ListTagsForResourceCommand({ ResourceType: 'Parameter', ResourceId: `${PREFIX}${fleetId}/ANTHROPIC_API_KEY` }));
      assert.deepEqual(tags.TagList, [{ Key: 'FleetId', Value: fleetId }]);
      const manifest = await (await s3.send(new GetObjectCommand({ Bucket: 'lb-fleet-results-migrated', Key: `${fleetId}/manifest.json` }))).Body!.transformToString();
      assert.match(manifest, /"honest"/);
      assert.ok(!leaks(manifest), 'the manifest holds no key');
      const QueueUrl = (await sqs.send(new GetQueueUrlCommand({ QueueName: `lb-fleet-${fleetId}-work` }))).QueueUrl!;
      // Visibility 0: the peek leaves the jobs for the worker.
      const peeked = (await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }))).Messages ?? [];
      assert.ok(peeked.length >= 1, 'jobs are queued');
      for (const m of peeked) assert.ok(!leaks(m.Body!) && !m.Body!.includes('ANTHROPIC_API_KEY'), m.Body);

      // The user's worker: no key of its own, only the model API's address (and the fleet's AWS).
      const workerEnv = withoutKeys(fleetEnv(moto, dirs, { ANTHROPIC_BASE_URL: model.anthropicBaseUrl, CT_FLEET_SECRETS_PREFIX: PREFIX }), []);
      const worker = await runCt(command.split(' ').slice(1), { cwd: dirs.work, env: workerEnv, timeoutMs: 180_000 });
      assert.equal(worker.code, 0, worker.stderr);
      assert.match(worker.stderr, /fleet secrets from SSM: ANTHROPIC_API_KEY, DOCKER_ORG_NAME, DOCKER_ORG_PAT\n/);
      assert.ok(!leaks(worker.stdout + worker.stderr), 'the worker never prints the key');

      const code = await exited;
      assert.equal(code, 0, controllerOut);
      assert.match(controllerOut, /2 job\(s\) enqueued, 0 worker\(s\) launched/);
      assert.match(controllerOut, /success: 2 sample\(s\)/);
      assert.ok(!leaks(controllerOut), 'the controller never prints the key');

      // The model API saw the key from SSM on every call.
      assert.ok(model.requests.length >= 2, `${model.requests.length} model call(s)`);
      for (const r of model.requests) assert.ok(r.headers['x-api-key'] === SECRET || r.headers.authorization === `Bearer ${SECRET}`, JSON.stringify(r.headers));

      const eventsText = readFileSync(join(logDir, 'fleet', fleetId, 'events.jsonl'), 'utf8');
      assert.ok(!leaks(eventsText), 'events.jsonl holds no key');
      const events = readEvents(eventsText);
      const stored = events.find((e) => e.event === 'secrets_stored');
      const deleted = events.find((e) => e.event === 'secrets_deleted');
      const parameters = NAMES.map((n) => `${PREFIX}${fleetId}/${n}`);
      assert.deepEqual([...(stored?.parameters as string[])].sort(), parameters);
      assert.deepEqual([...(deleted?.parameters as string[])].sort(), parameters);
      assert.ok(events.findIndex((e) => e.event === 'secrets_stored') < events.findIndex((e) => e.event === 'enqueue'), 'stored before any job is queued');

      assert.deepEqual(await runPython(ZIP_GREP, { path: onlyLog(logDir), needles: [SECRET, PAT] }), [], 'the merged log holds no key');
      const left = (await ssm.send(new GetParametersByPathCommand({ Path: PREFIX, Recursive: true }))).Parameters ?? [];
      assert.deepEqual(left, [], 'the parameters are deleted when the fleet completes');
      assert.deepEqual((await motoContents(moto)).queues, []);
    } finally {
      controller.kill('SIGKILL');
      ssm.destroy();
      sqs.destroy();
      s3.destroy();
    }
  });

  test('a prefix SSM would refuse is bad input: exit 2, nothing created', async () => {
    const cases: [string, RegExp][] = [
      ['/aws/ct/', /secrets_prefix.*SSM reserves names starting with aws or ssm/],
      ['/ct//fleet/', /secrets_prefix.*no empty level/],
      ['/a/b/c/d/e/f/g/h/i/j/k/l/m/n/', /secrets_prefix.*at most 13 levels/],
    ];
    for (const [prefix, message] of cases) {
      await moto.reset();
      const r = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: controllerEnv({ CT_FLEET_SECRETS_PREFIX: prefix }) });
      assert.equal(r.code, 2, `${prefix}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.deepEqual(await motoContents(moto), { queues: [], buckets: [], objects: [] }, prefix);
    }
  });

  test('when the secrets cannot be stored the fleet stops with a message before any job is queued', async () => {
    await moto.reset();
    // Nothing listens there: SSM is unreachable while SQS and S3 work.
    const r = await runCt([...RUN, '--log-dir', logDir, '--yes'], { cwd: dirs.work, env: controllerEnv({ AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:9' }) });
    assert.notEqual(r.code, 0, r.stderr);
    assert.match(r.stderr, /storing fleet secret \/ct-test\/fleet\/\w+\/ANTHROPIC_API_KEY in SSM/);
    assert.ok(!leaks(r.stdout + r.stderr));
    assert.deepEqual((await motoContents(moto)).queues, [], 'no queue, no job');
  });
});

/** `env` without any key variable except those in `keep` (the test's own environment may carry real ones). */
function withoutKeys(env: NodeJS.ProcessEnv, keep: string[]): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const n of KEY_VARS) if (!keep.includes(n)) delete out[n];
  return out;
}

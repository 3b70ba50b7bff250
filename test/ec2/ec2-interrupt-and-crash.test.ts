import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { RunInstancesCommand } from '@aws-sdk/client-ec2';
import { after, afterEach, before, test } from 'node:test';
import { REPO_ROOT } from '../helpers/paths.js';
import { runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { startEc2World, tag, type Ec2World } from './helpers/ec2-world.js';

let world: Ec2World;

before(async () => {
  world = await startEc2World();
});
afterEach(async () => {
  await world.reset();
});
after(async () => {
  await world?.stop();
});

function sleepingTrajectory(seconds: number): string {
  const file = join(world.dir, `sleep-${seconds}.jsonl`);
  writeFileSync(file, `${JSON.stringify({ function: 'bash', arguments: { cmd: `sleep ${seconds}` } })}\n`);
  return file;
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const containersOf = (runId: string) =>
  execFileSync('docker', ['ps', '-aq', '--filter', `label=ct.run-id=${runId}`]).toString().split('\n').filter(Boolean);

test('Ctrl-C in the middle of a sample removes its containers and terminates the instance', async () => {
  const seconds = 4000 + Math.floor(Math.random() * 900);
  const child = startCt(
    ['run', 'eval', '--sandbox', 'ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', sleepingTrajectory(seconds)],
    { env: world.env() },
  );
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on('close', r));
  await waitForOutput(child, (t) => t.includes('EC2 Docker sandbox ready!'), 90_000);
  // The agent's command is running inside the sample's container.
  await until('the sample command', () => spawnSync('pgrep', ['-f', `sleep ${seconds}`]).status === 0);
  const [inst] = await world.instances();
  assert.equal(inst!.State?.Name, 'running');
  const runId = tag(inst!, 'ct:run-id')!;
  assert.ok(containersOf(runId).length > 0);
  child.kill('SIGINT');
  assert.equal(await exited, 130, stderr);
  assert.match(stderr, new RegExp(`EC2 instance ${inst!.InstanceId} terminated`));
  assert.equal((await world.instances())[0]!.State?.Name, 'terminated');
  assert.deepEqual(containersOf(runId), [], 'the sample containers are gone');
});

test('a run killed outright leaves its instance to `ct sandbox cleanup --sandbox ec2`', async () => {
  const child = startCt(
    ['run', 'eval', '--sandbox', 'ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'replay', '--trajectory', sleepingTrajectory(4999)],
    { env: world.env() },
  );
  const exited = new Promise((r) => child.on('close', r));
  await waitForOutput(child, (t) => t.includes('EC2 Docker sandbox ready!'), 90_000);
  const [inst] = await world.instances();
  const runId = tag(inst!, 'ct:run-id')!;
  child.kill('SIGKILL');
  await exited;
  try {
    assert.equal((await world.instances())[0]!.State?.Name, 'running', 'SIGKILL leaves no chance to clean up');
    const r = await runCt(['sandbox', 'cleanup', '--sandbox', 'ec2', '--json'], { env: world.env() });
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.deepEqual(report.removed, [`${inst!.InstanceId} (linuxbench-eval-${runId})`]);
    assert.equal((await world.instances())[0]!.State?.Name, 'terminated');
  } finally {
    // On EC2 the containers die with the instance; here they live on this machine's Docker.
    const ids = containersOf(runId);
    if (ids.length) execFileSync('docker', ['rm', '-f', ...ids]);
  }
});

test('a process that dies of an uncaught error still terminates its instance on the way out', async () => {
  const r = await world.ec2().send(new RunInstancesCommand({ ImageId: world.amiId, MinCount: 1, MaxCount: 1, InstanceType: 't3.micro' }));
  const id = r.Instances![0]!.InstanceId!;
  const hook = pathToFileURL(join(REPO_ROOT, 'dist', 'src', 'cloud', 'terminate-on-exit.js')).href;
  const crash = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `import { terminateOnExit } from '${hook}'; terminateOnExit('${id}', 'us-east-1'); setTimeout(() => { throw new Error('boom'); }, 10);`],
    { env: world.env(), encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(crash.status, 1);
  assert.match(crash.stderr, /boom/);
  assert.equal((await world.instances()).find((i) => i.InstanceId === id)?.State?.Name, 'terminated');
});

import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { startCt, waitForOutput } from '../helpers/cli.js';
import { freePort } from '../helpers/sshd.js';
import { startEc2World, type Ec2World } from './helpers/ec2-world.js';

let world: Ec2World;

before(async () => {
  world = await startEc2World({ sshd: false });
});

after(async () => {
  await world?.stop();
});

test('SSH that is not ready for the first attempts is retried with growing delays until it answers', async () => {
  // Until sshd starts, the port accepts TCP and hangs up at once (as an instance whose sshd is
  // still starting or restarting under cloud-init does), then sshd takes over the port.
  const port = await freePort();
  let refused = 0;
  const placeholder = createServer((s) => {
    refused++;
    s.destroy();
  });
  await new Promise<void>((r) => placeholder.listen(port, '127.0.0.1', r));
  const child = startCt(['run', 'eval', '--sandbox', 'ec2', '-e', 'notes_app', '-t', 'create_greeting', '--policy', 'test'], {
    env: world.env({ CT_EC2_SSH_ENDPOINT: `127.0.0.1:${port}`, CT_EC2_SSH_USER: process.env.USER ?? 'root' }),
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => child.on('close', r));
  await waitForOutput(child, (t) => t.includes('Establishing SSH connection...'), 60_000);
  await new Promise((r) => setTimeout(r, 5000));
  await new Promise<void>((r) => placeholder.close(() => r()));
  await world.startSshd(port);
  assert.equal(await exited, 0, stderr);
  const connected = /SSH connected in (\d+\.\d)s/.exec(stderr);
  assert.ok(connected, stderr);
  assert.ok(Number(connected[1]) >= 4, `connected after ${connected[1]} s`);
  // Each failed attempt is said, with why and when the next comes.
  assert.match(stderr, /^   SSH attempt 1 of \d+ failed \(.+\); trying again in 2 s$/m);
  assert.ok(refused >= 3, `${refused} connections were turned away before sshd ran (probe plus SSH attempts)`);
  assert.match(stderr, /EC2 Docker sandbox ready!/);
  assert.equal((await world.instances())[0]!.State?.Name, 'terminated');
});

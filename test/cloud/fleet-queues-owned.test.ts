/**
 * A fleet whose workers are not EC2 instances (here `local:1`) is still its launcher's:
 * the controller tags the queues it creates (FleetId, LaunchedBy, ManagedBy), so `ct cloud
 * status` shows the fleet to the user who started it without --all-users, and not to another.
 */
import assert from 'node:assert/strict';
import { ListQueueTagsCommand, ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { finished, runCt, startCt, waitForOutput } from '../helpers/cli.js';
import { FAKE_AWS, fleetEnv, fleetWorkDir } from '../helpers/fleet.js';
import { testLogDir } from '../helpers/log-dirs.js';
import { startMoto, type Moto } from '../helpers/moto.js';
import { clientConfig, iamUser, type Keys } from './seed.js';

describe('fleet queues carry their launcher', () => {
  let moto: Moto;
  let dirs: ReturnType<typeof fleetWorkDir>;
  before(async () => {
    moto = await startMoto();
    dirs = fleetWorkDir('owned');
  });
  after(async () => {
    await moto.stop();
    rmSync(dirs.work, { recursive: true, force: true });
  });

  test('a fleet of local workers shows in its launcher cloud status, not in another user', { timeout: 240_000 }, async () => {
    const alice: Keys = await iamUser(moto, 'alice');
    const bob: Keys = await iamUser(moto, 'bob');
    const as = (keys: Keys) => fleetEnv(moto, dirs, { ...FAKE_AWS, ...keys });
    // A job that runs long enough to look at the fleet while it works.
    const slow = join(dirs.work, 'slow.jsonl');
    writeFileSync(slow, '{"function": "bash", "arguments": {"cmd": "sleep 60"}}\n{"function": "submit", "arguments": {"answer": "done"}}\n');
    const controller = startCt(
      ['run', 'eval', '--fleet', '--workers', 'local:1', '-e', 'notes_app', '-t', 'fix_config', '--policy', 'replay', '--trajectory', slow, '--log-dir', testLogDir('owned'), '--yes'],
      { cwd: dirs.work, env: as(alice) },
    );
    try {
      const head = await waitForOutput(controller, (t) => /fleet ([0-9a-f]{16}): \d+ job\(s\) queued/.test(t), 180_000);
      const fleetId = /fleet ([0-9a-f]{16}): \d+ job\(s\) queued/.exec(head)![1]!;
      const sqs = new SQSClient(clientConfig(moto));
      try {
        const urls = (await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? [];
        assert.equal(urls.length, 3, urls.join(', '));
        for (const url of urls) {
          const tags = (await sqs.send(new ListQueueTagsCommand({ QueueUrl: url }))).Tags ?? {};
          assert.deepEqual({ fleet: tags.FleetId, by: tags.LaunchedBy, managed: tags.ManagedBy }, { fleet: fleetId, by: 'alice', managed: 'ct' }, url);
        }
      } finally {
        sqs.destroy();
      }
      const status = (keys: Keys) => runCt(['cloud', 'status', '--json'], { cwd: dirs.work, env: as(keys), timeoutMs: 60_000 });
      const mine = await status(alice);
      assert.equal(mine.code, 0, mine.stderr);
      assert.ok(JSON.parse(mine.stdout).fleets.some((f: { fleetId: string }) => f.fleetId === fleetId), mine.stdout);
      const theirs = await status(bob);
      assert.equal(theirs.code, 0, theirs.stderr);
      assert.ok(!JSON.parse(theirs.stdout).fleets.some((f: { fleetId: string }) => f.fleetId === fleetId), theirs.stdout);
    } finally {
      controller.kill('SIGINT');
      await finished(controller).catch(() => undefined);
    }
  });
});

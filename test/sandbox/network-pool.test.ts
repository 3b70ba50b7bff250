import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalRunner } from '../../src/host/local-runner.js';
import { DockerProvider } from '../../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../../src/sandbox/run-registry.js';
import type { SampleSandboxes } from '../../src/sandbox/types.js';
import { FIXTURES } from '../helpers/paths.js';

// Docker's default address pools hold about 30 bridge networks; ct gives each sample a subnet
// from its own pool, so more samples than that can run at once.
test('40 samples with their own networks run at once without exhausting address pools', async () => {
  const runId = newRunId();
  const registry = new RunRegistry(join(tmpdir(), 'ct-test-state'));
  registry.register(runId);
  const provider = new DockerProvider({ runner: new LocalRunner(), runId, registry });
  const env = { name: 'tiny', composeFile: join(FIXTURES, 'tiny', 'compose.yml') };
  const live: SampleSandboxes[] = [];
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < 40) {
          const i = next++;
          live.push(await provider.sampleInit(env, { label: `pool-${i}` }));
        }
      }),
    );
    assert.equal(live.length, 40);
    const subnets = execFileSync('docker', ['network', 'ls', '--filter', 'label=com.docker.compose.project', '--format', '{{.Name}}'], {
      encoding: 'utf8',
    })
      .split('\n')
      .filter((n) => n.startsWith(`ct-${runId}-`));
    assert.equal(subnets.length, 40, 'one network per sample');
    const r = await live[39]!.get('default')!.exec(['sh', '-c', 'echo ok']);
    assert.equal(r.stdout, 'ok\n');
  } finally {
    await provider.taskCleanup();
    registry.unregister(runId);
  }
  const left = execFileSync('docker', ['ps', '-aq', '--filter', `label=ct.run-id=${runId}`], { encoding: 'utf8' }).trim();
  assert.equal(left, '', 'every sample torn down');
});

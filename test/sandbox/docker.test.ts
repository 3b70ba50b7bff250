import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalRunner } from '../../src/host/local-runner.js';
import { DockerProvider } from '../../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../../src/sandbox/run-registry.js';
import { FIXTURES } from '../helpers/paths.js';
import { conformanceSuite } from './conformance.js';

/** Every notice a provider gave: with the channel on, none is expected on these images. */
const notices: string[] = [];

function provider(compose: 'auto' | 'v1' | 'v2', execChannel: boolean): () => Promise<DockerProvider> {
  return async () => {
    const runId = newRunId();
    const registry = new RunRegistry(join(tmpdir(), 'ct-test-state'));
    registry.register(runId);
    return new DockerProvider({ runner: new LocalRunner(), runId, registry, compose, execChannel, onNotice: (m) => notices.push(m) });
  };
}

for (const compose of (process.env.CT_TEST_COMPOSE ?? 'auto').split(',') as ('auto' | 'v1' | 'v2')[]) {
  for (const execChannel of [true, false]) {
    conformanceSuite({
      name: `docker (compose ${compose}, exec channel ${execChannel ? 'on' : 'off'})`,
      provider: provider(compose, execChannel),
      env: { name: 'conformance', composeFile: join(FIXTURES, 'conformance', 'compose.yml') },
      users: true,
      services: ['helper'],
    });
  }
}

for (const execChannel of [true, false]) {
  conformanceSuite({
    name: `docker, busybox-only default service (exec channel ${execChannel ? 'on' : 'off'})`,
    provider: provider('auto', execChannel),
    env: { name: 'conformance-busybox', composeFile: join(FIXTURES, 'conformance-busybox', 'compose.yml') },
    users: true,
    services: [],
  });
}

test('the exec channel stayed on for debian and busybox images (no fallback notice)', () => {
  assert.deepEqual(notices, []);
});

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LocalRunner } from '../../src/host/local-runner.js';
import { DockerProvider } from '../../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../../src/sandbox/run-registry.js';
import { FIXTURES } from '../helpers/paths.js';
import { conformanceSuite } from './conformance.js';

for (const compose of (process.env.CT_TEST_COMPOSE ?? 'auto').split(',') as ('auto' | 'v1' | 'v2')[]) {
  conformanceSuite({
    name: `docker (compose ${compose})`,
    provider: async () => {
      const runId = newRunId();
      const registry = new RunRegistry(join(tmpdir(), 'ct-test-state'));
      registry.register(runId);
      return new DockerProvider({ runner: new LocalRunner(), runId, registry, compose });
    },
    env: { name: 'conformance', composeFile: join(FIXTURES, 'conformance', 'compose.yml') },
    users: true,
    services: ['helper'],
  });
}

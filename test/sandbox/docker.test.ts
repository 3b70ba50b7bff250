import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LocalRunner } from '../../src/host/local-runner.js';
import { ContainerSandbox } from '../../src/sandbox/docker/container-sandbox.js';
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

/** Both Compose versions where both are installed (v2 is what users have; v1 is Debian's). */
function installedComposeVersions(): ('v1' | 'v2')[] {
  const works = (cmd: string, args: string[]) => {
    try {
      execFileSync(cmd, args, { stdio: 'ignore', timeout: 20_000 });
      return true;
    } catch {
      return false;
    }
  };
  const found: ('v1' | 'v2')[] = [];
  if (works('docker', ['compose', 'version'])) found.push('v2');
  if (works('docker-compose', ['version'])) found.push('v1');
  return found;
}

const composeVersions = process.env.CT_TEST_COMPOSE
  ? (process.env.CT_TEST_COMPOSE.split(',') as ('auto' | 'v1' | 'v2')[])
  : installedComposeVersions();

for (const compose of composeVersions) {
  // v1 is checked with the default (channel on) only, to keep the suite's time in bounds.
  for (const execChannel of compose === 'v1' ? [true] : [true, false]) {
    conformanceSuite({
      name: `docker (compose ${compose}, exec channel ${execChannel ? 'on' : 'off'})`,
      provider: provider(compose, execChannel),
      env: { name: 'conformance', composeFile: join(FIXTURES, 'conformance', 'compose.yml') },
      users: true,
      services: ['helper'],
      channelArgv: execChannel,
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
    channelArgv: execChannel,
  });
}

/** Exec channel agents running in a container, counted from outside with plain `docker exec`. */
function agentsIn(container: string): number {
  const out = execFileSync('docker', ['exec', container, 'sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done']).toString();
  // The native agent, or the sh agent (its boot script comes first on its command line).
  return out.split('\n').filter((l) => /^\/\S*\/ct-agent\.[^/]+\/ct-exec-agent \//.test(l) || l.startsWith('sh -c if [ -n "${2-}" ]')).length;
}

test('a sample\'s default service has its exec channel ready when sampleInit returns', async () => {
  const env = { name: 'conformance', composeFile: join(FIXTURES, 'conformance', 'compose.yml') };
  for (const execChannel of [true, false]) {
    const p = await provider('auto', execChannel)();
    await p.taskInit(env);
    const sandboxes = await p.sampleInit(env, { label: 'warm' });
    try {
      const ids = [...sandboxes.values()].map((sb) => (sb as ContainerSandbox).containerId);
      // Ready, not starting: the first call takes it at once instead of racing its start.
      const pool = (sandboxes.get('default') as unknown as { channels?: { stats(): unknown } }).channels;
      if (execChannel) assert.deepEqual(pool!.stats(), [{ user: '', live: 1, idle: 1, disabled: undefined }]);
      assert.equal(agentsIn(ids[0]!), execChannel ? 1 : 0, `agents in default with the channel ${execChannel ? 'on' : 'off'}`);
      const first = await sandboxes.get('default')!.exec(['sh', '-c', 'echo $PPID']);
      assert.equal(first.stdout === '0\n', !execChannel, 'the first call goes through the channel when it is on');
      // Other services start theirs on first use.
      assert.equal(agentsIn(ids[1]!), 0);
    } finally {
      await p.sampleCleanup(sandboxes);
      await p.taskCleanup();
    }
  }
});

test('the exec channel stayed on for debian and busybox images (no fallback notice)', () => {
  assert.deepEqual(notices, []);
});

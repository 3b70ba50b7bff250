import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { RunRegistry, newRunId } from '../../src/sandbox/run-registry.js';
import { createSshProvider, type SshDockerProvider } from '../../src/sandbox/ssh/ssh-provider.js';
import { conformanceSuite } from '../sandbox/conformance.js';
import { FIXTURES } from '../helpers/paths.js';
import { startSshd, type Sshd } from '../helpers/sshd.js';

// The SSH provider against this machine's Docker reached through a loopback sshd: every compose,
// docker and file-transfer command travels over SSH, as it would to a remote host.
let sshd: Sshd;
const providers: SshDockerProvider[] = [];

before(async () => {
  sshd = await startSshd();
});

after(async () => {
  for (const p of providers) await p.close();
  await sshd?.stop();
});

for (const execChannel of [true, false]) {
  conformanceSuite({
    name: `ssh (remote Docker over one SSH connection, exec channel ${execChannel ? 'on' : 'off'})`,
    provider: async () => {
      const state = mkdtempSync(join(tmpdir(), 'ct-ssh-conf-'));
      const config = loadConfig({
        cwd: state,
        env: { CT_STATE_DIR: state, CT_SSH_KEY: sshd.clientKeyFile, CT_EXEC_CHANNEL: String(execChannel) },
      });
      const runId = newRunId();
      const registry = new RunRegistry(state);
      registry.register(runId);
      const provider = createSshProvider(`ssh://${sshd.user}@${sshd.host}:${sshd.port}`, { config, runId, registry });
      providers.push(provider);
      await provider.preflight();
      return provider;
    },
    env: { name: 'conformance', composeFile: join(FIXTURES, 'conformance', 'compose.yml') },
    users: true,
    services: ['helper'],
    channelArgv: execChannel,
  });
}

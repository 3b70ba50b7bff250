import { LocalProvider } from '../../src/sandbox/local/local-provider.js';
import { conformanceSuite } from './conformance.js';

conformanceSuite({
  name: 'local',
  provider: async () => new LocalProvider(),
  env: { name: 'none', composeFile: '/nonexistent' },
  users: process.getuid?.() === 0,
  services: [],
});

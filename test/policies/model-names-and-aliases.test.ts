import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { ModelRegistry } from '../../src/models/model-registry.js';
import { FakeModelServer } from './helpers/fake-model-server.js';
import { tempDir } from './helpers/run-ct.js';

/** How model names, aliases, roles, base URLs and keys resolve from config (ct.config.yml, env, flags). */
describe('model names, aliases and base URLs', () => {
  const server = new FakeModelServer(() => ({ text: 'hi' }));
  before(() => server.start());
  after(() => server.stop());

  const registryFrom = (yaml: string, env: Record<string, string> = {}, overrides: Record<string, unknown> = {}) => {
    const cwd = tempDir('ct-model-config-');
    writeFileSync(join(cwd, 'ct.config.yml'), yaml);
    return new ModelRegistry(loadConfig({ cwd, env, overrides }).models);
  };
  const ask = { input: [{ role: 'user' as const, content: 'hi' }], tools: [], toolChoice: 'auto' as const, config: {} };

  it('follows alias chains and remembers the role they went through', () => {
    const r = registryFrom('models:\n  aliases:\n    fast: openai/gpt-4.1-mini\n', {}, { 'models.aliases.untrusted': 'fast' });
    assert.deepEqual(r.resolveName('untrusted'), { name: 'openai/gpt-4.1-mini', provider: 'openai', model: 'gpt-4.1-mini', role: 'untrusted' });
    // Defaults stay when the config adds aliases of its own.
    assert.equal(r.resolveName('opus').name, 'anthropic/claude-opus-4-5');
    // A model id may itself contain slashes (OpenRouter style).
    assert.equal(r.resolveName('openai/meta-llama/llama-3.1-8b').model, 'meta-llama/llama-3.1-8b');
  });

  it('refuses an alias loop', () => {
    const r = registryFrom('models:\n  aliases:\n    a: b\n    b: a\n');
    assert.throws(() => r.resolveName('a'), (e: unknown) => e instanceof ConfigError && /alias loop: a -> b -> a/.test(e.message));
  });

  it('takes a per-model base URL from config, and -p base_url over it; such a server needs no key', async () => {
    const r = registryFrom(`models:\n  base_urls:\n    openai/llama3.1: ${server.openaiBaseUrl}\n`);
    const local = await r.get('openai/llama3.1');
    assert.equal(local.baseUrl, server.openaiBaseUrl);
    const before = server.requests.length;
    await local.generate(ask);
    assert.equal(server.requests[before]!.body.model, 'llama3.1');
    assert.equal(server.requests[before]!.headers.authorization, 'Bearer none');
    const other = await r.get('openai/llama3.1', { baseUrl: 'http://127.0.0.1:9/v1' });
    assert.equal(other.baseUrl, 'http://127.0.0.1:9/v1');
    // The provider's own endpoint always needs a key.
    await assert.rejects(r.get('openai/gpt-4.1'), /needs OPENAI_API_KEY/);
  });

  it('rejects a base URL that is not http(s)', async () => {
    const r = registryFrom('{}\n', { ANTHROPIC_API_KEY: 'k' });
    await assert.rejects(r.get('haiku', { baseUrl: 'localhost:8000' }), /must start with http:\/\/ or https:\/\//);
  });
});

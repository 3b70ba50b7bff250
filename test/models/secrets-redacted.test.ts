import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { unzipSync } from 'fflate';
import { FakeModelServer } from '../policies/helpers/fake-model-server.js';
import { onlyLog, runCt, tempDir } from '../policies/helpers/run-ct.js';

/**
 * A model server (a proxy, a self-hosted one) that echoes the request's Authorization and
 * x-api-key headers in its error body: the key, from the environment or from `.env`, must reach
 * neither the console nor any member of the log; a marker naming the variable stands in its place.
 * The agent runs on the host (`--sandbox local --unsafe-local`): no Docker.
 */
describe('API keys a model server echoes in its error never reach the console or the log', () => {
  const server = new FakeModelServer(FakeModelServer.sequence([{ text: 'never answered' }]));
  before(() => server.start());
  after(() => server.stop());

  const echo = (headers: Record<string, string | string[] | undefined>) => ({
    type: 'error',
    // The key first: the console shows the start of an error.
    error: { type: 'authentication_error', message: `${headers['x-api-key'] ?? headers.authorization} refused` },
    request: { headers },
  });

  const cases = [
    { provider: 'anthropic', variable: 'ANTHROPIC_API_KEY', model: 'haiku', key: 'sk-ant-api03-EnvKeyNeverShown-0123456789', from: 'env', status: 401 },
    { provider: 'openai', variable: 'OPENAI_API_KEY', model: 'openai/gpt-4.1-nano', key: 'sk-proj-DotenvKeyNeverShown-9876543210', from: '.env', status: 500 },
    { provider: 'anthropic', variable: 'ANTHROPIC_API_KEY', model: 'haiku', key: 'sk-ant-api03-DotenvKeyNeverShown-5555', from: '.env', status: 500 },
    { provider: 'openai', variable: 'OPENAI_API_KEY', model: 'openai/gpt-4.1-nano', key: 'sk-proj-EnvKeyNeverShown-4444444444', from: 'env', status: 401 },
  ] as const;

  for (const c of cases) {
    it(`${c.provider}, key from ${c.from}, ${c.status} echoing the headers`, async () => {
      const cwd = tempDir('ct-secrets-');
      const logDir = join(cwd, 'logs');
      const env: Record<string, string> =
        c.provider === 'anthropic' ? { ANTHROPIC_BASE_URL: server.anthropicBaseUrl } : { OPENAI_BASE_URL: server.openaiBaseUrl };
      if (c.from === 'env') env[c.variable] = c.key;
      else writeFileSync(join(cwd, '.env'), `${c.variable}=${c.key}\n`);
      // A 500 is retried: once here, quickly, so the retry's progress note is printed too.
      writeFileSync(join(cwd, 'ct.config.yml'), 'models:\n  max_retries: 1\n  retry_base_seconds: 0.05\n  retry_max_seconds: 0.1\n');
      server.requests.length = 0;
      server.failures = Array.from({ length: 2 }, () => ({ status: c.status, echo }));

      const r = await runCt(
        ['run', 'eval', '-e', 'notes_app', '-t', 'fix_config', '--sandbox', 'local', '--unsafe-local', '--policy', 'honest', '-p', `model=${c.model}`, '-p', 'max_steps=3', '--log-dir', logDir],
        { cwd, env },
      );
      // The server did see the key, and answered with it.
      assert.ok(server.requests.length >= 1, r.stderr);
      assert.equal(server.requests[0]!.status, c.status);
      assert.equal(r.code, 1, r.stderr + r.stdout);

      assert.ok(!r.stdout.includes(c.key), `key in stdout:\n${r.stdout}`);
      assert.ok(!r.stderr.includes(c.key), `key in stderr:\n${r.stderr}`);
      assert.ok((r.stdout + r.stderr).includes(`***[${c.variable}]`), `no marker on the console:\n${r.stdout}\n${r.stderr}`);

      const members = unzipSync(readFileSync(onlyLog(logDir)));
      const names = Object.keys(members);
      assert.ok(names.some((n) => n.startsWith('samples/')), names.join(', '));
      const base64 = Buffer.from(c.key).toString('base64').replace(/=+$/, '');
      for (const [name, bytes] of Object.entries(members)) {
        const text = Buffer.from(bytes).toString('utf8');
        assert.ok(!text.includes(c.key) && !text.includes(encodeURIComponent(c.key)) && !text.includes(base64), `key in ${name}`);
      }
      const sample = Buffer.from(members[names.find((n) => n.startsWith('samples/'))!]!).toString('utf8');
      const parsed = JSON.parse(sample);
      assert.match(parsed.error.message, new RegExp(`\\*\\*\\*\\[${c.variable}\\]`));
      assert.ok(!parsed.error.traceback.includes(c.key));
      const modelEvent = parsed.events.find((e: { event: string }) => e.event === 'model');
      assert.match(modelEvent.error, new RegExp(`\\*\\*\\*\\[${c.variable}\\]`));
    });
  }
});

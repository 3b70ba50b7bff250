import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { ModelError } from '../../src/errors.js';
import { Transcript } from '../../src/log/transcript.js';
import { ModelRegistry } from '../../src/models/model-registry.js';
import { generateAndRecord } from '../../src/models/record-model-call.js';
import type { GenerateRequest } from '../../src/models/types.js';
import { AGENT_TOOLS } from '../../src/policies/tools/tool-definitions.js';
import { FakeModelServer } from './helpers/fake-model-server.js';
import { tempDir } from './helpers/run-ct.js';

/** Model calls through the official SDKs against a scripted server that throttles and fails. */
describe('model calls retry throttling and server errors, once, with backoff', () => {
  const server = new FakeModelServer(FakeModelServer.sequence([{ text: 'hello', toolCalls: [{ name: 'bash', args: { cmd: 'ls' } }] }]));
  before(() => server.start());
  after(() => server.stop());
  beforeEach(() => {
    server.requests.length = 0;
    server.failures = [];
  });

  const registry = (overrides: Record<string, unknown> = {}) =>
    new ModelRegistry(
      loadConfig({
        cwd: tempDir('ct-models-'),
        env: {
          ANTHROPIC_API_KEY: 'sk-ant-test',
          ANTHROPIC_BASE_URL: server.anthropicBaseUrl,
          OPENAI_API_KEY: 'sk-test',
          OPENAI_BASE_URL: server.openaiBaseUrl,
        },
        overrides: { 'models.retry_base_seconds': 0.05, 'models.retry_max_seconds': 2, ...overrides },
      }).models,
    );
  const request = (signal?: AbortSignal): GenerateRequest => ({
    input: [{ role: 'user', content: 'list the files' }],
    tools: AGENT_TOOLS,
    toolChoice: 'auto',
    config: {},
    signal,
  });

  it('retries a 429 and records the retry on the model event (Anthropic)', async () => {
    server.failures = [{ status: 429, body: { type: 'error', error: { type: 'rate_limit_error', message: 'Number of requests has exceeded your rate limit' } } }];
    const model = await registry().get('haiku');
    const t = new Transcript();
    const output = await generateAndRecord(model, t, request());
    assert.deepEqual(server.requests.map((r) => r.status), [429, 200]);
    assert.equal(output.completion, 'hello');
    assert.deepEqual(output.choices[0]!.message.tool_calls?.map((c) => c.arguments), [{ cmd: 'ls' }]);
    const event = t.events.find((e) => e.event === 'model');
    assert.equal(event?.event === 'model' && event.retries, 1);
    assert.equal(t.modelUsage['anthropic/claude-haiku-4-5']?.total_tokens, 120);
  });

  it('retries 503 then honours retry-after-ms on a 429 (OpenAI)', async () => {
    server.failures = [{ status: 503 }, { status: 429, headers: { 'retry-after-ms': '400' } }];
    const model = await registry().get('openai/gpt-4.1-nano');
    const started = Date.now();
    const r = await model.generate(request());
    assert.ok(Date.now() - started >= 400, 'waited as long as the server asked');
    assert.equal(r.retries, 2);
    assert.deepEqual(server.requests.map((x) => x.status), [503, 429, 200]);
  });

  it('does not retry a request the API refuses (400), and says why', async () => {
    server.failures = [{ status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'max_tokens: too large' } } }];
    const model = await registry().get('sonnet');
    await assert.rejects(model.generate(request()), (e: unknown) => {
      assert.ok(e instanceof ModelError);
      assert.equal(e.retryable, false);
      assert.match(e.message, /model anthropic\/claude-sonnet-4-5 at http:\/\/127\.0\.0\.1:\d+: .*max_tokens: too large/);
      return true;
    });
    assert.equal(server.requests.length, 1);
  });

  it('gives up after max_retries on a throttled API, marked retryable', async () => {
    server.failures = Array.from({ length: 10 }, () => ({ status: 429 }));
    const model = await registry({ 'models.max_retries': 2 }).get('trusted');
    await assert.rejects(model.generate(request()), (e: unknown) => {
      assert.ok(e instanceof ModelError);
      assert.equal(e.retryable, true);
      assert.match(e.message, /rate limited \(429\).*gave up after 3 attempts/);
      return true;
    });
    // Three requests: one retry policy, the SDK's own retries are off.
    assert.equal(server.requests.length, 3);
  });

  it('stops waiting when the sample is stopped during a backoff', async () => {
    server.failures = [{ status: 429, headers: { 'retry-after': '30' } }];
    const model = await registry({ 'models.retry_max_seconds': 60 }).get('haiku');
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const started = Date.now();
    await assert.rejects(model.generate(request(ac.signal)));
    assert.ok(Date.now() - started < 5000);
    assert.equal(server.requests.length, 1);
  });
});

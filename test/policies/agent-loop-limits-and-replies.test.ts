import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/config.js';
import { Transcript } from '../../src/log/transcript.js';
import { ModelRegistry } from '../../src/models/model-registry.js';
import { honestPolicy } from '../../src/policies/honest-policy.js';
import { AgentTools, DEFAULT_TOOL_OPTIONS } from '../../src/policies/tools/agent-tools.js';
import type { PolicyContext, PolicyResult } from '../../src/policies/types.js';
import type { Sample } from '../../src/tasks/types.js';
import { FakeModelServer, type Script } from './helpers/fake-model-server.js';
import { InstantSandbox } from './helpers/instant-sandbox.js';
import { tempDir } from './helpers/run-ct.js';

const sample: Sample = (() => {
  const mainTask = {
    id: 'greet',
    name: 'Greet',
    taskCategory: 'add_feature',
    shortDescription: '',
    scorerDescription: '',
    coverage: '',
    description: 'Write a greeting.',
    dir: '/nonexistent',
    scorer: { file: '/nonexistent/scorer.sh' },
  };
  return {
    id: 'env:greet',
    env: { id: 'env', setting: 's', dir: '/nonexistent', composeFile: '/nonexistent/compose.yml', hostPowers: [], description: 'A box.', mainTasks: new Map([['greet', mainTask]]), sideTasks: new Map() },
    mainTask,
  };
})();

/**
 * The agent loop through the honest policy and the real OpenAI SDK against the scripted server,
 * with an in-memory sandbox (the Docker path is covered by honest-policy-solves-main-task).
 */
describe('the agent loop: limits, replies without tools, malformed tool calls', () => {
  let server: FakeModelServer;
  before(async () => (server = await new FakeModelServer(() => ({ text: 'unset' })).start()));
  after(() => server.stop());

  async function run(script: Script, limits: PolicyContext['limits'] = {}, args: Record<string, string> = {}) {
    server.script = script;
    server.requests.length = 0;
    const models = new ModelRegistry(loadConfig({ cwd: tempDir('ct-loop-'), env: { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: server.openaiBaseUrl } }).models);
    const policy = await honestPolicy.create({ model: 'trusted', max_steps: '80', ...args }, { models, cwd: process.cwd() });
    const sandbox = new InstantSandbox();
    const transcript = new Transcript();
    const result: PolicyResult = await policy.run({
      sample,
      epoch: 1,
      sandboxes: new Map([['default', sandbox]]),
      tools: new AgentTools(sandbox, transcript, DEFAULT_TOOL_OPTIONS),
      transcript,
      signal: new AbortController().signal,
      limits,
    });
    return { result, transcript, sandbox };
  }

  it('stops at the message limit before calling the model again', async () => {
    const { result, transcript } = await run(FakeModelServer.sequence([{ toolCalls: [{ name: 'bash', args: { cmd: 'echo hi' } }] }]), { messages: 6 });
    assert.deepEqual(result.limit, { type: 'message', limit: 6, reason: 'message limit (6) reached' });
    // system, user, then (assistant, tool) twice = 6 messages after 2 model calls.
    assert.equal(transcript.messages.length, 6);
    assert.equal(server.requests.length, 2);
    assert.equal(result.output?.choices[0]?.message.tool_calls?.[0]?.function, 'bash');
  });

  it('nudges a model that answers without calling a tool, and counts that as a step', async () => {
    const { result, transcript } = await run(
      FakeModelServer.sequence([{ text: 'I think I am done.' }, { toolCalls: [{ name: 'submit', args: { answer: 'ok' } }] }]),
    );
    assert.equal(result.submission, 'ok');
    assert.deepEqual(transcript.messages.map((m) => m.role), ['system', 'user', 'assistant', 'user', 'assistant', 'tool']);
    assert.match(String(transcript.messages[3]!.content), /call submit/);
  });

  it('answers a tool call with broken JSON arguments with a parsing error and runs nothing', async () => {
    const { result, transcript, sandbox } = await run(
      FakeModelServer.sequence([
        { toolCalls: [{ name: 'bash', args: {}, rawArguments: '{"cmd": "ls' }] },
        { toolCalls: [{ name: 'submit', args: { answer: '' } }] },
      ]),
    );
    assert.equal(result.submission, '');
    const toolMessage = transcript.messages.find((m) => m.role === 'tool');
    assert.equal(toolMessage?.role === 'tool' && toolMessage.error?.type, 'parsing');
    assert.match(String(toolMessage?.role === 'tool' && toolMessage.error?.message), /not valid JSON/);
    assert.deepEqual(sandbox.commands, []);
    // The model was told: the next request carries the tool result with the error.
    const sent = server.requests[1]!.body.messages.at(-1);
    assert.equal(sent.role, 'tool');
    assert.match(sent.content, /not valid JSON/);
  });

  it('passes generation settings through to the request', async () => {
    await run(FakeModelServer.sequence([{ toolCalls: [{ name: 'submit', args: { answer: '' } }] }]), {}, { temperature: '0.2', max_tokens: '500', reasoning_effort: 'low' });
    const body = server.requests[0]!.body;
    assert.equal(body.temperature, 0.2);
    // A base URL of its own means an OpenAI-compatible server: max_tokens, which they all accept.
    assert.equal(body.max_tokens, 500);
    assert.equal(body.reasoning_effort, 'low');
  });
});

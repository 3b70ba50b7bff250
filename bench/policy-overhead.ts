/**
 * Policy overhead per agent step: everything ct does in a step except the model's own latency
 * and the tool's own run time. That is: building the request from the conversation, the SDK and
 * the loopback HTTP round trip, parsing the reply, recording the model event (with attachments),
 * running the tool call through AgentTools (event, truncation, tool message) and the loop itself.
 *
 * Measured side by side in one run, for both wire protocols, with the honest policy:
 * - "SDK + HTTP": the official SDK against the scripted model server on 127.0.0.1 (the one the
 *   tests use), in this process. Its handling time (parse, script, reply) stands for the model's
 *   latency and is subtracted; the server's HTTP receive is not, so this errs high.
 * - "ct only": a model that converts the request to the provider's wire format and parses a wire
 *   reply, without SDK or HTTP: the part of the overhead that is ct's own code.
 * The sandbox answers every command at once with a fixed output; its time is subtracted anyway.
 *
 *   node dist/bench/policy-overhead.js            80 steps a run, 3 runs per row
 *   node dist/bench/policy-overhead.js --quick    20 steps a run, 1 run per row
 *
 * Target: under 5 ms a step.
 */
import { cpus, loadavg } from 'node:os';
import { loadConfig } from '../src/config/config.js';
import { Transcript } from '../src/log/transcript.js';
import { anthropicOutput, anthropicRequest } from '../src/models/anthropic-model.js';
import { ModelRegistry } from '../src/models/model-registry.js';
import { openaiOutput, openaiRequest } from '../src/models/openai-model.js';
import type { GenerateRequest, GenerateResult, Model } from '../src/models/types.js';
import { honestPolicy } from '../src/policies/honest-policy.js';
import { AgentTools, DEFAULT_TOOL_OPTIONS } from '../src/policies/tools/agent-tools.js';
import type { ModelSource } from '../src/policies/types.js';
import type { Sample } from '../src/tasks/types.js';
import { FakeModelServer, anthropicReply, openaiReply, type Script } from '../test/policies/helpers/fake-model-server.js';
import { InstantSandbox } from '../test/policies/helpers/instant-sandbox.js';

const quick = process.argv.includes('--quick');
const STEPS = quick ? 20 : 80;
const RUNS = quick ? 1 : 3;
/** Bytes of output each command prints (a typical `ls`/`cat`); the log keeps it, the model sees it. */
const OUTPUT_BYTES = 2000;
const TARGET_MS = 5;
const TOOL_OUTPUT = `${'x'.repeat(79)}\n`.repeat(Math.ceil(OUTPUT_BYTES / 80)).slice(0, OUTPUT_BYTES);

type Provider = 'anthropic' | 'openai';
type Path = 'SDK + HTTP' | 'ct only';

const script: Script = ({ step }) =>
  step < STEPS - 1
    ? { text: `Step ${step}.`, toolCalls: [{ name: 'bash', args: { cmd: `ls -la /srv/${step}` } }] }
    : { toolCalls: [{ name: 'submit', args: { answer: 'done' } }] };

/** The provider's request conversion and reply parsing, without SDK or HTTP. */
class WireOnlyModel implements Model {
  readonly name: string;
  private n = 0;
  constructor(readonly provider: Provider) {
    this.name = provider === 'anthropic' ? 'anthropic/claude-haiku-4-5' : 'openai/gpt-4.1-nano';
  }
  async generate(req: GenerateRequest): Promise<GenerateResult> {
    const model = this.name.split('/')[1]!;
    const body = this.provider === 'anthropic' ? anthropicRequest(model, req) : openaiRequest(model, req);
    const step = req.input.filter((m) => m.role === 'assistant').length;
    const wire = (this.provider === 'anthropic' ? anthropicReply : openaiReply)(body, script({ provider: this.provider, body, step }), ++this.n);
    const output = this.provider === 'anthropic' ? anthropicOutput(wire as never, 0) : openaiOutput(wire as never, 0);
    return { output, call: { request: body, response: wire as Record<string, unknown>, time: 0 }, retries: 0 };
  }
}

function benchSample(): Sample {
  const mainTask = {
    id: 'bench',
    name: 'Benchmark task',
    taskCategory: 'add_feature',
    shortDescription: '',
    scorerDescription: '',
    coverage: '',
    description: 'Run commands until told to submit.',
    dir: '/nonexistent',
    scorer: { file: '/nonexistent/scorer.sh' },
  };
  const env = {
    id: 'bench_env',
    setting: 'bench',
    dir: '/nonexistent',
    composeFile: '/nonexistent/compose.yml',
    hostPowers: [],
    description: 'A machine for measuring the agent loop.',
    mainTasks: new Map([[mainTask.id, mainTask]]),
    sideTasks: new Map(),
  };
  return { id: 'bench_env:bench', env, mainTask };
}

/** Per-step overhead (ms) of one run of STEPS steps. */
async function runOnce(provider: Provider, path: Path): Promise<number[]> {
  const server = path === 'SDK + HTTP' ? await new FakeModelServer(script).start() : undefined;
  try {
    const models: ModelSource = server
      ? new ModelRegistry(
          loadConfig({
            cwd: '/nonexistent-bench-cwd',
            env:
              provider === 'anthropic'
                ? { ANTHROPIC_API_KEY: 'bench', ANTHROPIC_BASE_URL: server.anthropicBaseUrl }
                : { OPENAI_API_KEY: 'bench', OPENAI_BASE_URL: server.openaiBaseUrl },
          }).models,
        )
      : { get: async () => new WireOnlyModel(provider) };
    const model = provider === 'anthropic' ? 'anthropic/claude-haiku-4-5' : 'openai/gpt-4.1-nano';
    const policy = await honestPolicy.create({ model, max_steps: String(STEPS + 5) }, { models, cwd: process.cwd() });
    const sandbox = new InstantSandbox(TOOL_OUTPUT);
    const transcript = new Transcript();
    const tools = new AgentTools(sandbox, transcript, DEFAULT_TOOL_OPTIONS);
    const result = await policy.run({
      sample: benchSample(),
      epoch: 1,
      sandboxes: new Map([['default', sandbox]]),
      tools,
      transcript,
      signal: new AbortController().signal,
      limits: {},
    });
    if (result.submission !== 'done') throw new Error(`the run did not finish: ${JSON.stringify(result)}`);
    // A step runs from one model event's start to the next (the last one: to the end of the run).
    const starts = transcript.events.filter((e) => e.event === 'model').map((e) => e.working_start * 1000);
    const endMs = transcript.elapsed() * 1000;
    const execPerStep = sandbox.execMs / STEPS;
    return starts.map((s, i) => (starts[i + 1] ?? endMs) - s - (server?.requests[i]!.handlingMs ?? 0) - execPerStep);
  } finally {
    await server?.stop();
  }
}

/** Milliseconds a call takes with nothing to convert: a bare fetch, and a one-message SDK call. */
async function floors(): Promise<{ fetchMs: number; sdkMs: Record<Provider, number> }> {
  const server = await new FakeModelServer(() => ({ text: 'ok' })).start();
  const N = quick ? 50 : 200;
  try {
    const timeIt = async (fn: () => Promise<unknown>) => {
      for (let i = 0; i < 10; i++) await fn();
      const before = server.requests.length;
      const t = performance.now();
      for (let i = 0; i < N; i++) await fn();
      const handling = server.requests.slice(before).reduce((n, r) => n + r.handlingMs, 0);
      return (performance.now() - t - handling) / N;
    };
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    const fetchMs = await timeIt(async () => {
      const r = await fetch(`${server.openaiBaseUrl}/chat/completions`, { method: 'POST', headers: { authorization: 'Bearer bench', 'content-type': 'application/json' }, body });
      await r.json();
    });
    const models = new ModelRegistry(
      loadConfig({
        cwd: '/nonexistent-bench-cwd',
        env: { ANTHROPIC_API_KEY: 'bench', ANTHROPIC_BASE_URL: server.anthropicBaseUrl, OPENAI_API_KEY: 'bench', OPENAI_BASE_URL: server.openaiBaseUrl },
      }).models,
    );
    const sdkMs = {} as Record<Provider, number>;
    for (const provider of ['anthropic', 'openai'] as const) {
      const model = await models.get(provider === 'anthropic' ? 'haiku' : 'trusted');
      sdkMs[provider] = await timeIt(() => model.generate({ input: [{ role: 'user', content: 'hi' }], tools: [], toolChoice: 'auto', config: {} }));
    }
    return { fetchMs, sdkMs };
  } finally {
    await server.stop();
  }
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const rows: string[][] = [];
  for (const path of ['SDK + HTTP', 'ct only'] as const) {
    for (const provider of ['anthropic', 'openai'] as const) {
      await runOnce(provider, path); // warm-up: module loading, JIT, first connection
      const steps: number[] = [];
      const late: number[] = [];
      for (let r = 0; r < RUNS; r++) {
        const s = await runOnce(provider, path);
        steps.push(...s);
        late.push(...s.slice(-Math.ceil(STEPS / 10)));
      }
      const sorted = [...steps].sort((a, b) => a - b);
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      rows.push([
        provider,
        path,
        String(steps.length),
        mean(steps).toFixed(2),
        pct(sorted, 50).toFixed(2),
        pct(sorted, 95).toFixed(2),
        sorted.at(-1)!.toFixed(2),
        mean(late).toFixed(2),
        mean(steps) < TARGET_MS ? 'yes' : 'NO',
      ]);
    }
  }
  const floor = await floors();
  const head = ['provider', 'path', 'steps', 'mean ms', 'p50 ms', 'p95 ms', 'max ms', 'late steps ms', `mean < ${TARGET_MS} ms`];
  const lines = [
    '## Policy overhead per agent step (honest policy, scripted model, instant sandbox)',
    '',
    `Configuration: ${STEPS} steps a run, ${RUNS} run(s) per row${quick ? ' (--quick)' : ''}; ${OUTPUT_BYTES} B of tool output a step; ` +
      `Node ${process.version}; ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? 'unknown'}), load average ${loadavg()[0]!.toFixed(2)}. ` +
      '"late steps" = mean of the last tenth of each run, where the conversation is longest.',
    '',
    `| ${head.join(' | ')} |`,
    `| ${head.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
    '',
    `Floor on this machine (same server, nothing to convert): a bare fetch round trip ${floor.fetchMs.toFixed(2)} ms; ` +
      `a one-message call through the SDK: anthropic ${floor.sdkMs.anthropic.toFixed(2)} ms, openai ${floor.sdkMs.openai.toFixed(2)} ms.`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();

/**
 * The first tool call of a sample against a plain `docker exec`, side by side:
 *   first     the bash tool's first call (`echo hi`, through AgentTools itself: its shell
 *             lookup included), sent the moment sampleInit returns (the worst case: a policy
 *             calls at once), through the default provider (exec channel on; sampleInit
 *             includes the channel's start);
 *   later     the next bash tool calls on the same sandbox;
 *   raw       `docker exec CONTAINER bash -c 'echo hi'` spawned directly, no ct code, on the
 *             same container after the ct calls;
 *   plain     the same first call with the exec channel off (one docker exec per call);
 *   after 1 s the first call sent 1 s after sampleInit returns, as a model policy sends it
 *             (its first model call comes first), the channel ready by then;
 *   sh agent  the first and later calls with the channel's sh agent (CT_EXEC_AGENT=sh), where
 *             the native agent cannot run;
 *   streams   the later calls with the native agent's channel kept on its docker exec streams
 *             (no direct socket: the remote case, or where /proc/PID/cwd cannot be entered).
 * Each repetition is a fresh sample (compose project) of a one-service environment.
 * Usage: node dist/bench/first-call.js [--quick] [--reps N]
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Transcript } from '../src/log/transcript.js';
import { LocalRunner } from '../src/host/local-runner.js';
import { AgentTools } from '../src/policies/tools/agent-tools.js';
import { DockerProvider } from '../src/sandbox/docker/docker-provider.js';
import { RunRegistry, newRunId } from '../src/sandbox/run-registry.js';
import type { Sandbox } from '../src/sandbox/types.js';
import { fmt, median, p95, table, timeMs } from './stats.js';

const run = promisify(execFile);
const quick = process.argv.includes('--quick');
const repsArg = process.argv.indexOf('--reps');
const REPS = repsArg > 0 ? Number(process.argv[repsArg + 1]) : quick ? 4 : 12;
const LATER = 20;
const IMAGE = 'debian:bookworm-slim';
let callId = 0;
/** One bash tool call; fails the bench if the tool did not answer `hi`. */
async function echo(tools: AgentTools): Promise<void> {
  const out = await tools.call({ id: `c${++callId}`, type: 'function', function: 'bash', arguments: { cmd: 'echo hi' } });
  if (out.error || out.output.trim() !== 'hi') throw new Error(`bash tool answered ${JSON.stringify(out)}`);
}

function rawExec(container: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', ['exec', container, 'bash', '-c', 'echo hi'], { stdio: ['pipe', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`docker exec exited ${code}`))));
    child.stdin.end();
  });
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'ct-bench-first-'));
  const composeFile = join(dir, 'compose.yml');
  writeFileSync(composeFile, `services:\n  default:\n    image: ${IMAGE}\n    command: ["sleep", "infinity"]\n    init: true\n`);
  const env = { name: 'bench', composeFile };
  const runId = newRunId();
  const registry = new RunRegistry(join(dir, 'state'));
  registry.register(runId);
  const channel = new DockerProvider({ runner: new LocalRunner(), runId, registry });
  const shAgent = new DockerProvider({ runner: new LocalRunner(), runId, registry, execAgent: 'sh' });
  const plain = new DockerProvider({ runner: new LocalRunner(), runId, registry, execChannel: false });
  const streams = new DockerProvider({ runner: new LocalRunner(), runId, registry, directChannels: false });
  const first: number[] = [];
  const firstPlain: number[] = [];
  const firstLate: number[] = [];
  const later: number[] = [];
  const firstSh: number[] = [];
  const firstStreams: number[] = [];
  const laterSh: number[] = [];
  const laterStreams: number[] = [];
  const raw: number[] = [];
  const initChannel: number[] = [];
  const initPlain: number[] = [];
  try {
    await channel.taskInit(env);
    for (let rep = 0; rep < REPS; rep++) {
      for (const [provider, into, delayMs] of [
        [channel, first, 0],
        [plain, firstPlain, 0],
        [channel, firstLate, 1000],
        [shAgent, firstSh, 0],
        [streams, firstStreams, 0],
      ] as const) {
        let sandboxes!: Map<string, Sandbox>;
        const initMs = await timeMs(async () => (sandboxes = await provider.sampleInit(env, { label: `first-${rep}` })));
        if (provider === channel) initChannel.push(initMs);
        else if (provider === plain) initPlain.push(initMs);
        const sb = sandboxes.get('default')!;
        const tools = new AgentTools(sb, new Transcript());
        if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
        into.push(await timeMs(() => echo(tools)));
        if (into === first) {
          for (let i = 0; i < LATER; i++) later.push(await timeMs(() => echo(tools)));
          const container = sb.describe().replace(/^docker:/, '');
          for (let i = 0; i < 3; i++) raw.push(await timeMs(() => rawExec(container)));
        }
        if (into === firstSh) for (let i = 0; i < LATER; i++) laterSh.push(await timeMs(() => echo(tools)));
        if (into === firstStreams) for (let i = 0; i < LATER; i++) laterStreams.push(await timeMs(() => echo(tools)));
        await provider.sampleCleanup(sandboxes);
      }
    }
  } finally {
    await channel.taskCleanup();
    await plain.taskCleanup();
    await shAgent.taskCleanup();
    await streams.taskCleanup();
    registry.unregister(runId);
    rmSync(dir, { recursive: true, force: true });
  }
  const version = (await run('docker', ['version', '--format', '{{.Server.Version}}'])).stdout.trim();
  const rawMedian = median(raw);
  const row = (what: string, xs: number[]) => [what, String(xs.length), fmt(median(xs)), fmt(p95(xs)), (median(xs) / rawMedian).toFixed(3)];
  console.log(
    `\nFirst tool call vs docker exec (image ${IMAGE}, Docker Engine ${version}, ${cpus().length} CPUs, node ${process.version}, ` +
      `${REPS} samples; ratios are medians over raw docker exec; sample init median ${fmt(median(initChannel))} ms with the ` +
      `channel (its start included), ${fmt(median(initPlain))} ms without)\n`,
  );
  console.log(
    table(
      ['what', 'calls', 'median ms', 'p95 ms', 'ratio vs raw'],
      [
        row('raw `docker exec` (no ct)', raw),
        row('first call, exec channel', first),
        row(`later calls (${LATER} a sample), exec channel`, later),
        row('first call, channel off (plain docker exec)', firstPlain),
        row('first call 1 s after init, exec channel', firstLate),
        row('first call, exec channel, sh agent', firstSh),
        row(`later calls (${LATER} a sample), exec channel, sh agent`, laterSh),
        row(`later calls (${LATER} a sample), exec channel on docker exec streams`, laterStreams),
      ],
    ),
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

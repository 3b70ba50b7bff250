/**
 * What redacting secrets costs a log write (src/config/secret-registry.ts, applied by the log
 * writer to each member's JSON). Side by side in one run:
 *   - the redaction pass alone over one large serialised sample, in MB/s, with 0, 7 (the variables
 *     ct registers: model keys, git and registry tokens, AWS secret key and session token) and
 *     50 secrets registered (each in its 5-6 forms);
 *   - a whole log write (EvalLogWriter: serialise, redact, deflate, append) of the same samples,
 *     with 0 and with 7 secrets registered, and the ratio.
 * Text holds no secret (the common case): every byte is searched and nothing replaced.
 *
 * Usage: node dist/bench/redact-secrets.js [--samples N] [--kib-per-sample K] [--reps R]
 * Defaults: 200 samples of ~512 KiB of JSON each (~100 MB per log), 3 repetitions, median shown.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { clearSecrets, redactSecrets, registerSecret } from '../src/config/secret-registry.js';
import { loadConfig } from '../src/config/config.js';
import { evalPlan, evalSpec, type EvalSpecInput } from '../src/eval/eval-spec.js';
import { buildSampleOptions } from '../src/eval/sample-options.js';
import { EvalLogWriter } from '../src/log/eval-writer.js';
import { stringifyInspectJson } from '../src/log/inspect-json.js';
import type { EvalSample } from '../src/log/types.js';

const { values } = parseArgs({
  options: { samples: { type: 'string', default: '200' }, 'kib-per-sample': { type: 'string', default: '512' }, reps: { type: 'string', default: '3' } },
});
const SAMPLES = Number(values.samples);
const KIB = Number(values['kib-per-sample']);
const REPS = Number(values.reps);

/** Tool output that looks like a terminal's: words, paths and hex, ~4 KiB a message. */
function toolOutput(n: number): string {
  const lines: string[] = [];
  for (let i = 0; lines.join('\n').length < 4096; i++) {
    lines.push(`-rw-r--r-- 1 root root ${1000 + i * 7} Mar  1 10:0${i % 10} /app/src/module_${n}_${i}.py ${randomBytes(12).toString('hex')} ok`);
  }
  return lines.join('\n');
}

function sample(id: number): EvalSample {
  const messages: unknown[] = [{ role: 'user', content: `Fix the app (sample ${id}).`, source: 'input' }];
  for (let i = 0, bytes = 0; bytes < KIB * 1024; i++) {
    const out = toolOutput(i);
    bytes += out.length + 200;
    messages.push({ role: 'assistant', content: 'Looking.', source: 'generate', tool_calls: [{ id: `c${i}`, function: 'bash', arguments: { cmd: 'ls -la /app' }, type: 'function' }] });
    messages.push({ role: 'tool', content: out, tool_call_id: `c${i}`, function: 'bash' });
  }
  const now = new Date().toISOString();
  return {
    id,
    epoch: 1,
    input: `Fix the app (sample ${id}).`,
    target: '',
    messages,
    output: { model: 'none', choices: [], completion: '' },
    scores: { linux_scorer: { value: { main_task_success: 'C' }, explanation: '', history: [] } },
    metadata: {},
    store: {},
    events: [],
    model_usage: {},
    role_usage: {},
    started_at: now,
    completed_at: now,
    total_time: 1,
    working_time: 1,
    uuid: `u${id}`,
    attachments: {},
  } as unknown as EvalSample;
}

function registerTypical(n: number): void {
  clearSecrets();
  const names = ['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'GITHUB_TOKEN', 'GH_TOKEN', 'DOCKER_ORG_PAT', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'];
  for (let i = 0; i < n; i++) registerSecret(names[i % names.length]!, `sk-${randomBytes(24).toString('base64url')}`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function writeLog(samples: EvalSample[]): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'ct-bench-redact-'));
  try {
    const input: EvalSpecInput = {
      taskName: 'bench',
      samples: samples.map((s) => ({ id: String(s.id) })),
      epochs: 1,
      maxSamples: 1,
      sandbox: 'local',
      policyName: 'test',
      policyArgs: {},
      sampleOptions: buildSampleOptions(loadConfig({ cwd: dir, env: {} }), {}),
      runId: 'bench',
      version: '0',
    };
    const started = performance.now();
    const w = await EvalLogWriter.create({ logDir: dir, spec: evalSpec(input), plan: evalPlan(input), fileName: 'bench.eval' });
    for (const s of samples) await w.addSample(s);
    await w.finish({ status: 'success', stats: { started_at: new Date().toISOString(), completed_at: new Date().toISOString(), connection_limit_history: [] } });
    return performance.now() - started;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const samples = Array.from({ length: SAMPLES }, (_, i) => sample(i + 1));
const text = stringifyInspectJson(samples[0]);
const mb = text.length / 1e6;
console.log(`# redaction cost: ${SAMPLES} samples x ${(mb * 1000).toFixed(0)} KB of JSON (${(mb * SAMPLES).toFixed(0)} MB per log), ${REPS} reps, median; ${cpus()[0]?.model ?? 'cpu'}, node ${process.version}`);
console.log('');
console.log('| what | secrets | ms | MB/s | ratio to 0 secrets |');
console.log('|---|---|---|---|---|');
for (const n of [0, 7, 50]) {
  registerTypical(n);
  const times: number[] = [];
  for (let r = 0; r < REPS; r++) {
    const t = performance.now();
    for (let i = 0; i < 20; i++) redactSecrets(text);
    times.push((performance.now() - t) / 20);
  }
  const ms = median(times);
  // With nothing registered the pass returns at once: no ratio to it.
  console.log(`| redaction pass, one sample | ${n} | ${ms.toFixed(3)} | ${(mb / (ms / 1000)).toFixed(0)} | - |`);
}
const writeMs = new Map<number, number>();
for (const n of [0, 7]) {
  registerTypical(n);
  const times: number[] = [];
  for (let r = 0; r < REPS; r++) times.push(await writeLog(samples));
  const ms = median(times);
  writeMs.set(n, ms);
  console.log(`| whole log write | ${n} | ${ms.toFixed(0)} | ${((mb * SAMPLES) / (ms / 1000)).toFixed(0)} | ${(ms / writeMs.get(0)!).toFixed(3)} |`);
}

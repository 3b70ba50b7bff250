import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import {
  CancelledError,
  CtError,
  ExecTimeoutError,
  SampleError,
  SandboxUnavailableError,
  ScorerError,
  errorMessage,
  isRetryable,
  sampleEnd,
  type SampleEnd,
} from '../errors.js';
import { redactSecrets } from '../config/secret-registry.js';
import { backoffDelays, sleep } from '../host/backoff.js';
import type { EvalError, EvalSample, Score } from '../log/types.js';
import { AgentTools } from '../policies/tools/agent-tools.js';
import type { Policy, PolicyResult } from '../policies/types.js';
import type { SampleSandboxes, Sandbox, SandboxProvider } from '../sandbox/types.js';
import { runCheckScript, type CheckResult } from '../scoring/check-script.js';
import { gateSandboxes } from '../sandbox/gated-sandbox.js';
import { ApartScoring, CannotPutError, whyNotApart, changedPaths, fingerprint, scorerInterpreter, type Fingerprint } from '../scoring/isolated-scorer.js';
import type { Sample } from '../tasks/types.js';
import type { SampleOptions } from './sample-options.js';
import { Transcript } from '../log/transcript.js';

/** The score every sample gets (control-tower convention). */
export const SCORER_NAME = 'linux_scorer';

/** The options every sample of a run shares; the schema lives in sample-options.ts (the fleet's manifest reuses it). */
export type RunSampleOptions = SampleOptions;

export interface RunSampleArgs {
  sample: Sample;
  epoch: number;
  provider: SandboxProvider;
  policy: Policy;
  options: RunSampleOptions;
  /**
   * Aborted on Ctrl-C: the sample stops in whatever phase it is, its sandbox is torn down, and it
   * is recorded as cancelled (with the abort's reason when that is a string).
   */
  signal: AbortSignal;
  onPhase?: (phase: SamplePhase) => void;
  /**
   * Readies the sample's environment before its sandbox starts (image builds, once per
   * environment: `RunSession.prepareEnvironment`); a failure here is the sample's error.
   */
  prepare?: () => Promise<void>;
}

/** A finished sample and how it ended (`sampleEnd`: the one rule for what its error means). */
export interface SampleOutcome {
  sample: EvalSample;
  end: SampleEnd;
  /** The error's own message (the log's carries its class name too). */
  reason?: string;
}

/** Where a sample is; reported to progress displays. */
export type SamplePhase = 'starting' | 'setup' | 'agent' | 'scoring' | 'cleanup';

const PHASE_WORDS: Record<SamplePhase, string> = {
  starting: 'starting the sandbox',
  setup: 'running the setup scripts',
  agent: 'the agent worked',
  scoring: 'scoring',
  cleanup: 'cleaning up',
};

/** The sample's error once its signal aborted: the abort's reason when it gives one (a string), and the phase. */
function cancellation(signal: AbortSignal, phase: SamplePhase): CancelledError {
  const why = typeof signal.reason === 'string' ? signal.reason : 'cancelled by the user';
  return new CancelledError(`${why} (while ${PHASE_WORDS[phase]})`);
}

/**
 * Waits for `work` unless the signal aborts first, then throws CancelledError at once. The work
 * itself is not waited for: the sample's teardown (sampleCleanup) stops what it runs in the
 * sandbox, and its late outcome is ignored.
 */
async function untilAborted<T>(work: Promise<T> | undefined, signal: AbortSignal): Promise<T> {
  if (work === undefined) return undefined as T;
  work.catch(() => {});
  if (signal.aborted) throw new CancelledError('cancelled by the user');
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(new CancelledError('cancelled by the user'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort!);
  }
}

/**
 * The one sample lifecycle, used by every placement (local, remote host, fleet worker):
 * sandbox init -> task setup -> policy -> liveness check -> scorers -> sandbox cleanup.
 * It never throws for a sample's own failures: they become `error` on the returned sample.
 */
export async function runSample(args: RunSampleArgs): Promise<SampleOutcome> {
  const { sample, epoch, provider, options, signal } = args;
  const t = new Transcript();
  const input = sample.mainTask.description;
  const metadata = sampleMetadata(sample);
  t.event({
    event: 'sample_init',
    sample: { id: sample.id, input, target: '', metadata, sandbox: { type: provider.name, config: sample.env.composeFile } },
    state: {},
  });
  let sandboxes: SampleSandboxes | undefined;
  let error: EvalError | undefined;
  let scores: Record<string, Score> | undefined;
  let result: PolicyResult = {};
  const retries: EvalError[] = [];
  let phase: SamplePhase = 'starting';
  let failure: unknown;
  const enter = (p: SamplePhase) => {
    // Every phase starts by checking the signal: a Ctrl-C that landed while the previous phase
    // finished must not let the sample go on into the next one.
    if (signal.aborted) throw cancellation(signal, phase);
    phase = p;
    args.onPhase?.(p);
  };
  try {
    enter('starting');
    await untilAborted(args.prepare?.(), signal);
    sandboxes = await startSandbox(args, t, retries);
    const def = sandboxes.get('default')!;
    enter('setup');
    for (const [label, script] of [
      ['main task', sample.mainTask.setupScript],
      ['side task', sample.sideTask?.setupScript],
    ] as const) {
      if (script) await untilAborted(runSetup(def, script, label, options.setupTimeout), signal);
    }
    // What the agent could replace to fool a scorer, hashed before its first action: alongside
    // the policy's start, its calls into the sandboxes held until the hashes are in.
    const watching = watchInterpreters(sample, def);
    watching.catch(() => {});
    enter('agent');
    const gated = gateSandboxes(sandboxes, watching);
    result = await runPolicy(args, gated, gated.get('default')!, t);
    const guard = await untilAborted(watching, signal);
    if (result.limit) {
      t.event({ event: 'sample_limit', type: result.limit.type, message: result.limit.reason ?? `${result.limit.type} limit reached`, limit: result.limit.limit });
    }
    enter('scoring');
    if (!(await def.isAlive())) {
      throw new SandboxUnavailableError('the sandbox died before scoring; the sample is not scored');
    }
    scores = { [SCORER_NAME]: await untilAborted(score(sample, def, result.submission ?? '', options.scorerTimeout, guard), signal) };
    t.event({ event: 'score', score: scores[SCORER_NAME]!, target: '', intermediate: false, scorer: SCORER_NAME });
    // A protocol's scores (max_suspicion) come from what happened while the agent worked.
    for (const [name, s] of Object.entries(args.policy.sampleScores?.(t) ?? {})) {
      scores[name] = s;
      t.event({ event: 'score', score: s, target: '', intermediate: false, scorer: name });
    }
  } catch (e) {
    // Whatever a phase failed with once the user stopped the run (a start killed half-way, an
    // exec cut off by the teardown) is a cancellation, not a failure of the sandbox or sample.
    error = toEvalError(signal.aborted ? cancellation(signal, phase) : e);
    t.event({ event: 'error', error });
    failure = e;
  } finally {
    if (sandboxes) {
      args.onPhase?.('cleanup');
      await provider.sampleCleanup(sandboxes).catch((e) => {
        t.event({ event: 'info', source: 'ct', data: { cleanup_error: errorMessage(e) } });
      });
    }
  }
  const completedAt = new Date();
  const lastAssistant = [...t.messages].reverse().find((m) => m.role === 'assistant');
  const evalSample: EvalSample = {
    id: sample.id,
    epoch,
    input,
    target: '',
    sandbox: { type: provider.name, config: sample.env.composeFile },
    messages: t.messages,
    output: result.output ? { ...result.output, completion: result.submission ?? result.output.completion } : {
      model: 'none',
      choices: lastAssistant ? [{ message: lastAssistant as never, stop_reason: 'tool_calls' }] : [],
      completion: result.submission ?? '',
    },
    ...(scores ? { scores } : {}),
    metadata: { ...metadata, ...(result.submission !== undefined ? { submission: result.submission } : {}) },
    store: {},
    events: t.events,
    model_usage: t.modelUsage,
    role_usage: t.roleUsage,
    started_at: t.startedAt.toISOString(),
    completed_at: completedAt.toISOString(),
    total_time: round((completedAt.getTime() - t.startedAt.getTime()) / 1000),
    working_time: round(t.elapsed()),
    uuid: randomUUID(),
    ...(error ? { error } : {}),
    ...(retries.length ? { error_retries: retries } : {}),
    attachments: t.attachments,
    ...(result.limit ? { limit: { type: result.limit.type, limit: result.limit.limit, ...(result.limit.reason ? { reason: result.limit.reason } : {}) } } : {}),
  };
  return { sample: evalSample, end: sampleEnd(failure, signal.aborted), ...(failure !== undefined ? { reason: errorMessage(failure) } : {}) };
}

async function startSandbox(args: RunSampleArgs, t: Transcript, retries: EvalError[]): Promise<SampleSandboxes> {
  const delays = backoffDelays(args.options.sandboxAttempts, 1000, 15_000);
  for (let attempt = 1; ; attempt++) {
    if (args.signal.aborted) throw new CancelledError('cancelled before the sandbox started');
    try {
      return await args.provider.sampleInit(
        { name: args.sample.env.id, composeFile: args.sample.env.composeFile },
        {
          label: `${args.sample.mainTask.id}-e${args.epoch}`,
          signal: args.signal,
          onNotice: (notice) => t.event({ event: 'info', source: 'sandbox', data: { notice } }),
        },
      );
    } catch (e) {
      if (!isRetryable(e) || attempt >= args.options.sandboxAttempts || args.signal.aborted) throw e;
      retries.push(toEvalError(e));
      t.event({ event: 'info', source: 'ct', data: { sandbox_retry: attempt, error: errorMessage(e) } });
      await sleep(delays[attempt - 1]!, args.signal);
    }
  }
}

/** Setup scripts change state, so they run exactly once: never retried. */
async function runSetup(sandbox: Sandbox, script: string, label: string, timeout: number): Promise<void> {
  const path = `/tmp/ct-setup-${randomUUID().slice(0, 8)}.sh`;
  await sandbox.writeFile(path, readFileSync(script));
  let r;
  try {
    r = await sandbox.exec(['sh', path], { timeout, cwd: '/' });
  } catch (e) {
    if (e instanceof ExecTimeoutError) throw new SampleError(`${label} setup script timed out after ${timeout} s`);
    throw e;
  }
  await sandbox.exec(['rm', '-f', path]).catch(() => {});
  if (!r.success) {
    throw new SampleError(`${label} setup script failed (exit ${r.returncode}):\n${(r.stderr || r.stdout).trim().split('\n').slice(-10).join('\n')}`);
  }
}

async function runPolicy(args: RunSampleArgs, sandboxes: SampleSandboxes, def: Sandbox, t: Transcript): Promise<PolicyResult> {
  const ac = new AbortController();
  const onAbort = () => ac.abort();
  // A listener added to an already aborted signal never fires: check first.
  if (args.signal.aborted) throw new CancelledError('cancelled by the user');
  args.signal.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const limit = args.options.sampleTimeLimit;
  const timer =
    limit !== undefined
      ? setTimeout(() => {
          timedOut = true;
          ac.abort();
        }, limit * 1000)
      : undefined;
  const tools = new AgentTools(def, t, args.options.tools);
  try {
    const run = args.policy.run({
      sample: args.sample,
      epoch: args.epoch,
      sandboxes,
      tools,
      transcript: t,
      signal: ac.signal,
      limits: { messages: args.options.messageLimit, tokens: args.options.tokenLimit },
    });
    // The policy is told to stop through the signal; the sample does not wait for it past that.
    const stopped = new Promise<PolicyResult>((resolve) =>
      ac.signal.addEventListener('abort', () => resolve({}), { once: true }),
    );
    const r = await Promise.race([run, stopped]);
    run.catch(() => {});
    if (args.signal.aborted) throw new CancelledError('cancelled by the user');
    if (timedOut) return { ...r, limit: { type: 'time', limit: limit!, reason: `sample time limit (${limit} s) reached` } };
    return r;
  } catch (e) {
    if (e instanceof CtError) throw e;
    throw new SampleError(`policy ${args.policy.name} failed: ${errorMessage(e)}`, { cause: e });
  } finally {
    if (timer) clearTimeout(timer);
    args.signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The interpreters' fingerprint before the agent acts, when scoring can happen apart from it
 * (scoring/isolated-scorer.ts); `unavailable` says why not where it should have.
 */
interface InterpreterGuard {
  before?: Fingerprint;
  unavailable?: string;
}

async function watchInterpreters(sample: Sample, sandbox: Sandbox): Promise<InterpreterGuard> {
  const why = whyNotApart(sandbox);
  if (why) return { unavailable: why };
  const extra = [sample.mainTask.scorer.file, sample.sideTask?.scorer.file].map((f) => (f ? scorerInterpreter(f) : undefined)).filter((p): p is string => p !== undefined);
  try {
    return { before: await fingerprint(sandbox, extra) };
  } catch (e) {
    // Infrastructure's failure (the engine lost the exec, the sandbox is gone) fails the attempt;
    // only the sandbox's own refusal leaves scoring without the guard.
    if (e instanceof SandboxUnavailableError || !(await sandbox.isAlive())) throw e;
    return { unavailable: errorMessage(e) };
  }
}

async function score(sample: Sample, sandbox: Sandbox, submission: string, timeoutSeconds: number, guard: InterpreterGuard): Promise<Score> {
  const env = {
    CT_SUBMISSION: submission,
    CT_ENV: sample.env.id,
    CT_MAIN_TASK: sample.mainTask.id,
    ...(sample.sideTask ? { CT_SIDE_TASK: sample.sideTask.id } : {}),
  };
  const checks: Record<string, unknown> = {};
  const files = [sample.mainTask.scorer.file, ...(sample.sideTask ? [sample.sideTask.scorer.file] : [])];
  let apart: ApartScoring | undefined;
  let mainDone: PromiseSettledResult<CheckResult> | undefined;
  if (guard.before) {
    try {
      apart = await ApartScoring.open(sandbox, files);
      // The hashes and the main scorer side by side (two fresh execs); neither removes the
      // directory, which the side task's scorer does, or the sandbox's removal right after.
      const [after, main] = await Promise.allSettled([apart.hash([...guard.before.keys()], false), apart.run(files[0]!, { env, timeoutSeconds }, guard.before, false)]);
      if (after.status === 'rejected') throw after.reason;
      const tampered = changedPaths(guard.before, after.value);
      if (tampered.length) checks.tampered = tampered;
      mainDone = main;
    } catch (e) {
      if (!(e instanceof CannotPutError)) throw e;
      checks.scored_apart = `no: ${errorMessage(e)}`;
    }
  } else if (guard.unavailable) {
    checks.scored_apart = `no: ${guard.unavailable}`;
  }
  const check = (file: string) =>
    apart ? apart.run(file, { env, timeoutSeconds }, guard.before, true) : runCheckScript(sandbox, file, { env, timeoutSeconds });
  if (mainDone?.status === 'rejected') throw mainDone.reason;
  const main = mainDone?.status === 'fulfilled' ? mainDone.value : await check(files[0]!);
  const side = sample.sideTask ? await check(files[1]!) : undefined;
  const value: Record<string, string> = { main_task_success: main.value };
  if (side) value.side_task_success = side.value;
  const explanation = [`main task: ${main.explanation}`, ...(side ? [`side task: ${side.explanation}`] : [])].join('\n');
  return {
    value,
    history: [],
    answer: submission,
    explanation,
    metadata: {
      ...checks,
      main_task_explanation: main.explanation,
      ...(Object.keys(main.metadata).length ? { main_task_metadata: main.metadata } : {}),
      ...(side ? { side_task_explanation: side.explanation } : {}),
      ...(side && Object.keys(side.metadata).length ? { side_task_metadata: side.metadata } : {}),
    },
  };
}

function sampleMetadata(sample: Sample): Record<string, unknown> {
  return {
    environment: sample.env.id,
    setting: sample.env.setting,
    main_task: sample.mainTask.id,
    main_task_name: sample.mainTask.name,
    task_category: sample.mainTask.taskCategory,
    side_task: sample.sideTask?.id ?? null,
  };
}

/** The error kinds a sample can end with, as written to the log. */
export function toEvalError(e: unknown): EvalError {
  const message =
    e instanceof ScorerError
      ? `ScorerError: ${e.message}`
      : e instanceof CtError
        ? `${e.name}: ${e.message}`
        : errorMessage(e);
  const traceback = redactSecrets(e instanceof Error && e.stack ? e.stack : message);
  return { message: redactSecrets(message), traceback, traceback_ansi: traceback };
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

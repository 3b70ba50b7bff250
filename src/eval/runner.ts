import { trustedPowers } from '../tasks/compose-trust.js';
import type { ProtocolPlan } from '../control/protocol-plan.js';
import { errorMessage } from '../errors.js';
import { EvalLogWriter } from '../log/eval-writer.js';
import { finalStatus, type FinalStatus } from '../log/final-status.js';
import { isoTimestamp } from '../log/timestamps.js';
import type { EvalLog, EvalSample, EvalStatus } from '../log/types.js';
import type { Policy } from '../policies/types.js';
import type { Sample } from '../tasks/types.js';
import { evalPlan, evalSpec, type EvalSpecInput } from './eval-spec.js';
import type { ProgressReporter } from './progress.js';
import { SampleTally } from './sample-tally.js';
import { SCORER_NAME } from './run-sample.js';
import type { RunSession } from './run-session.js';
import { runSamplePool, type PoolItem } from './sample-pool.js';
import type { SampleOptions } from './sample-options.js';

/**
 * Sample-epochs one run may hold (100,000): the runner and the log writer keep a small summary of
 * every finished sample, and a run that size already takes days on one machine. More is almost
 * surely a typo (`--epochs 1000000000000`); real work that big belongs in several runs.
 */
export const MAX_SAMPLE_EPOCHS = 100_000;

export interface RunEvalOptions {
  /** Name of the run's task (the task set, or the environments). */
  taskName: string;
  samples: Sample[];
  epochs: number;
  /** Samples running at once. */
  maxSamples: number;
  /** Provider, run id, Ctrl-C signal and environment builds of this run. */
  session: RunSession;
  policy: Policy;
  policyArgs: Record<string, string>;
  /** `--protocol` around the policy (the log's spec says so). */
  protocol?: ProtocolPlan;
  /** `provider/model` the policy calls, for the log's `eval.model` (default none/none). */
  model?: string;
  /** What every sample shares, `failOnError` (which errors fail the run) included. */
  sampleOptions: SampleOptions;
  logDir: string;
  version: string;
  progress: ProgressReporter;
  /** Finished samples kept row by row for the summary, at most (default 0: only tallied). */
  keepRows?: number;
}

export interface RunEvalResult {
  logPath: string;
  status: EvalStatus;
  /** The finished samples as the summary needs them; memory flat in the run's size. */
  tally: SampleTally;
  /** Why the run failed outside its samples (the log's `error`), if it did. */
  error?: string;
  header: EvalLog;
}

/**
 * The local runner = run session + sample pool + incremental log writer. Samples x epochs are
 * generated as the pool takes them; each environment is built once, before its first sample
 * (a failed build fails that environment's samples only); every finished sample is written to
 * the log as it lands.
 */
export async function runEval(o: RunEvalOptions): Promise<RunEvalResult> {
  const { session } = o;
  const startedAt = isoTimestamp();
  const total = o.samples.length * o.epochs;
  const log = await RunLog.create(o, total, startedAt);
  const tally = new SampleTally({ keepRows: o.keepRows ?? 0 });
  let runError: string | undefined;
  /** The log's status and error over the samples tallied so far (one rule for every log: log/final-status.ts). */
  const outcome = (how: { cancelled: boolean; runError?: string }) => finalStatus({ errors: tally.errors, total, failOnError: o.sampleOptions.failOnError, ...how });
  const removeHook = session.onForcedStop(async () => {
    await log.finish(outcome({ cancelled: true }));
  });
  o.progress.start(total);
  try {
    await runSamplePool({
      work: sampleEpochs(o.samples, o.epochs),
      maxSamples: Math.min(o.maxSamples, total),
      provider: session.provider,
      policy: o.policy,
      sampleOptions: o.sampleOptions,
      signal: session.signal,
      stopTaking: session.stopping,
      prepareEnvironment: ({ sample }) => session.prepareEnvironment({ name: sample.env.id, composeFile: sample.env.composeFile }),
      onStart: ({ sample, epoch }) => o.progress.sampleStarted(sample.id, epoch),
      onResult: async ({ sample, epoch }, result) => {
        await log.add(result);
        const score = result.scores?.[SCORER_NAME]?.value as Record<string, string> | undefined;
        const tampered = result.scores?.[SCORER_NAME]?.metadata?.tampered;
        const row = {
          id: sample.id,
          epoch,
          scores: score,
          error: result.error?.message,
          seconds: result.total_time ?? 0,
          ...(Array.isArray(tampered) && tampered.length ? { tampered: tampered.map(String) } : {}),
        };
        tally.add(row);
        o.progress.sampleFinished(row);
      },
    });
  } catch (e) {
    runError = errorMessage(e);
  } finally {
    await session.provider.taskCleanup().catch(() => {});
    o.progress.stop();
    removeHook();
  }
  const final = outcome({ cancelled: session.signal.aborted, ...(runError !== undefined && { runError }) });
  const header = await log.finish(final);
  return { logPath: log.path, status: final.status, tally, ...(runError ? { error: runError } : {}), header };
}

/** Samples x epochs, epoch by epoch, generated as they are taken (never held all at once). */
function* sampleEpochs(samples: readonly Sample[], epochs: number): Generator<PoolItem> {
  for (let epoch = 1; epoch <= epochs; epoch++) for (const sample of samples) yield { sample, epoch };
}

/** The run's `.eval` log: every use of the log writer by the local runner is here. */
class RunLog {
  private finishing?: Promise<EvalLog>;

  private constructor(
    private readonly writer: EvalLogWriter,
    private readonly total: number,
    private readonly startedAt: string,
  ) {}

  static async create(o: RunEvalOptions, total: number, startedAt: string): Promise<RunLog> {
    const spec: EvalSpecInput = {
      taskName: o.taskName,
      samples: o.samples,
      epochs: o.epochs,
      maxSamples: o.maxSamples,
      sandbox: o.session.provider.name,
      policyName: o.policy.name,
      policyArgs: o.policyArgs,
      ...(o.protocol ? { protocol: o.protocol } : {}),
      ...(o.model ? { model: o.model } : {}),
      sampleOptions: o.sampleOptions,
      runId: o.session.runId,
      version: o.version,
      trusted: trustedPowers(o.samples.map((s) => s.env)),
    };
    const writer = await EvalLogWriter.create({ logDir: o.logDir, spec: evalSpec(spec), plan: evalPlan(spec) });
    return new RunLog(writer, total, startedAt);
  }

  get path(): string {
    return this.writer.path;
  }

  async add(sample: EvalSample): Promise<void> {
    // After a forced stop finished the log, samples still landing are not written.
    if (this.finishing) return;
    await this.writer.addSample(sample);
  }

  /** Writes the header once; a second call (a forced stop racing the end of the run) gets the first's. */
  finish(final: FinalStatus): Promise<EvalLog> {
    this.finishing ??= this.finishNow(final);
    return this.finishing;
  }

  private finishNow(final: FinalStatus): Promise<EvalLog> {
    // The writer accumulates results and model usage as samples land: no sample is kept here.
    return this.writer.finish({
      status: final.status,
      totalSamples: this.total,
      stats: { started_at: this.startedAt, completed_at: isoTimestamp(), connection_limit_history: [] },
      ...(final.error && { error: final.error }),
    });
  }
}

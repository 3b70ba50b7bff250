/**
 * The options every sample of a run shares (limits, timeouts, and the rule that judges their
 * errors), as one zod schema: the local runner builds them from config and flags, the fleet
 * controller writes them into the manifest, and a fleet worker reads them back with the same
 * schema, so the three agree by construction.
 */
import { z } from 'zod';
import type { Config } from '../config/config.js';
import { FAIL_ON_ERROR_DEFAULT, failOnErrorSchema } from '../log/final-status.js';

export const sampleOptionsSchema = z.object({
  /** Seconds for the agent's work (policy); the sample stops cleanly when it passes. */
  sampleTimeLimit: z.number().positive().optional(),
  /** Seconds each scorer may run. */
  scorerTimeout: z.number().positive(),
  /** Seconds a setup script may run. */
  setupTimeout: z.number().positive(),
  /** Attempts to start the sandbox when infrastructure fails. */
  sandboxAttempts: z.number().int().min(1),
  messageLimit: z.number().int().positive().optional(),
  tokenLimit: z.number().int().positive().optional(),
  tools: z.object({
    /** Seconds a bash call may run. */
    bashTimeout: z.number().positive(),
    /** Characters of tool output shown to the model. */
    modelOutputLimit: z.number().int().positive(),
  }),
  /**
   * Which sample errors make the log's status `error` (`log/final-status.ts`; the log's
   * `eval.config.fail_on_error`). Default true; manifests written before it existed read so.
   */
  failOnError: failOnErrorSchema.default(FAIL_ON_ERROR_DEFAULT),
});

export type SampleOptions = z.infer<typeof sampleOptionsSchema>;

/** The per-run flags of `ct run eval` that set sample options (each overrides its config key). */
export interface SampleOptionFlags {
  sampleTimeLimit?: number;
  scorerTimeout?: number;
  messageLimit?: number;
  tokenLimit?: number;
  /** `--no-fail-on-error` gives false. */
  failOnError?: boolean;
}

/** Sample options from the compiled config and the run's flags (a flag wins over its config key). */
export function buildSampleOptions(config: Pick<Config, 'eval' | 'sandbox'>, flags: SampleOptionFlags): SampleOptions {
  return {
    ...(flags.sampleTimeLimit !== undefined ? { sampleTimeLimit: flags.sampleTimeLimit } : {}),
    scorerTimeout: flags.scorerTimeout ?? config.eval.scorer_timeout,
    setupTimeout: config.eval.setup_timeout,
    sandboxAttempts: config.sandbox.start_attempts,
    ...(flags.messageLimit !== undefined ? { messageLimit: flags.messageLimit } : {}),
    ...(flags.tokenLimit !== undefined ? { tokenLimit: flags.tokenLimit } : {}),
    tools: { bashTimeout: config.eval.bash_timeout, modelOutputLimit: config.eval.tool_output_limit },
    failOnError: flags.failOnError ?? FAIL_ON_ERROR_DEFAULT,
  };
}

/**
 * The options that change a sample's result, for the fleet id: `failOnError` only judges the
 * finished samples, so a run differing in it alone is the same fleet (resuming it redoes the merge).
 */
export function resultOptions(o: SampleOptions): Omit<SampleOptions, 'failOnError'> {
  const { failOnError: _judgesOnly, ...rest } = o;
  return rest;
}

/**
 * The options every sample of a run shares (limits and timeouts), as one zod schema: the local
 * runner builds them from config and flags, the fleet controller writes them into the manifest,
 * and a fleet worker reads them back with the same schema, so the three agree by construction.
 */
import { z } from 'zod';

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
});

export type SampleOptions = z.infer<typeof sampleOptionsSchema>;

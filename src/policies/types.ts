import type { Transcript } from '../eval/transcript.js';
import type { SampleSandboxes } from '../sandbox/types.js';
import type { Sample } from '../tasks/types.js';
import type { AgentTools } from './tools/agent-tools.js';

/**
 * A policy is the agent: given a sample's sandboxes and tools it works on the task and
 * (usually) submits. Built-in: test, replay (and, with a model, honest / attack). Users can
 * plug in their own as `path/or/pkg:exportName`.
 */
export interface PolicyContext {
  sample: Sample;
  epoch: number;
  sandboxes: SampleSandboxes;
  tools: AgentTools;
  transcript: Transcript;
  /** Aborted on Ctrl-C and when the sample's time limit passes. */
  signal: AbortSignal;
  limits: {
    /** Messages in the conversation before the sample stops. */
    messages?: number;
    tokens?: number;
  };
}

export interface PolicyResult {
  /** The submitted answer (scorers see it as CT_SUBMISSION). */
  submission?: string;
  /** Set when a limit ended the sample. */
  limit?: { type: 'message' | 'token' | 'time' | 'custom'; limit: number; reason?: string };
}

export interface Policy {
  readonly name: string;
  run(ctx: PolicyContext): Promise<PolicyResult>;
}

export interface PolicyArgSpec {
  description: string;
  default?: string;
  required?: boolean;
}

/** A named policy with its documented `-p key=value` arguments. */
export interface PolicyDefinition {
  name: string;
  description: string;
  args: Record<string, PolicyArgSpec>;
  create(args: Record<string, string>): Policy | Promise<Policy>;
}

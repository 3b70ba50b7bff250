import type { Transcript } from '../log/transcript.js';
import type { ChatMessageAssistant, ModelOutput, Score, ToolInfo } from '../log/types.js';
import type { Model } from '../models/types.js';
import type { SampleSandboxes } from '../sandbox/types.js';
import type { Sample } from '../tasks/types.js';
import type { AgentTools } from './tools/agent-tools.js';

/**
 * A policy is the agent: given a sample's sandboxes and tools it works on the task and
 * (usually) submits. Built-in: test, replay, and with a model honest, attack, obvious-attack.
 * Users can plug in their own as `path/or/pkg:exportName` (see external-policy.ts).
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
  /**
   * Set by a protocol (`ct run eval --protocol`): asked about every action (an assistant message
   * that calls tools) before it enters the conversation and its tool calls run. The agent loop
   * asks it; a policy that runs tool calls itself must ask it too.
   */
  reviewAction?: (request: ActionReviewRequest) => Promise<ActionReview>;
}

/** An action the untrusted model proposes, with what a replacement may be generated with. */
export interface ActionReviewRequest {
  message: ChatMessageAssistant;
  /** The tools the policy offered the model. */
  tools: ToolInfo[];
}

/**
 * What happens to a proposed action:
 * - `run`: it enters the conversation (as `message`, which may carry the reviewer's metadata) and its tool calls run;
 * - `replace`: `message` (another model's action) enters the conversation instead and its tool calls run;
 * - `stop`: `message` enters the conversation, its tool calls do not run, and the policy stops with `limit`.
 */
export type ActionReview =
  | { kind: 'run'; message: ChatMessageAssistant }
  | { kind: 'replace'; message: ChatMessageAssistant; output: ModelOutput }
  | { kind: 'stop'; message: ChatMessageAssistant; limit: NonNullable<PolicyResult['limit']> };

export interface PolicyResult {
  /** The submitted answer (scorers see it as CT_SUBMISSION). */
  submission?: string;
  /** Set when a limit ended the sample; `reason` says which (e.g. max_steps) in the log. */
  limit?: { type: 'message' | 'token' | 'time' | 'custom'; limit: number; reason?: string };
  /** The last model output (becomes the sample's `output`). */
  output?: ModelOutput;
}

export interface Policy {
  readonly name: string;
  /** `provider/model` the policy calls (the log's `eval.model`); absent for policies without a model. */
  readonly model?: string;
  /** True when the policy only makes sense on samples with a side task (attack policies). */
  readonly needsSideTask?: boolean;
  run(ctx: PolicyContext): Promise<PolicyResult>;
  /**
   * Scores the policy adds to the sample besides `linux_scorer` (a protocol's `max_suspicion`),
   * asked once the policy has stopped, however it stopped (submission, limit, time limit).
   */
  sampleScores?(transcript: Transcript): Record<string, Score>;
}

/** Where a policy gets its models: names and aliases in, ready models out (keys checked). */
export interface ModelSource {
  get(nameOrAlias: string, options?: { baseUrl?: string }): Promise<Model>;
}

/** What a policy is created with, besides its `-p` arguments. */
export interface PolicyEnvironment {
  models: ModelSource;
  /** The working directory of the run (relative paths in arguments are from here). */
  cwd: string;
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
  /** Pass every `-p` argument through unchecked (external policies that declare no args). */
  acceptsAnyArgs?: boolean;
  /** Builds the policy; throws ConfigError for bad arguments or a model that cannot be used. */
  create(args: Record<string, string>, env: PolicyEnvironment): Policy | Promise<Policy>;
}

import type { GenerateConfig, ModelUsage } from '../log/types.js';
import type { Model } from '../models/types.js';
import type { ModelSource, PolicyArgSpec } from '../policies/types.js';
import type { ActionView, TrajectoryView } from './monitor-view.js';

/**
 * A monitor is a trusted model rating how suspicious an agent's actions are. Action monitors rate
 * each assistant message that calls a tool (with the task and the transcript before it);
 * trajectory monitors rate a whole transcript once. Built-in: basic, ensemble, trajectory; users
 * plug in their own as `path/or/pkg:exportName`, like policies.
 */
export interface MonitorVerdict {
  /** 0-10; null when no reply had a readable score. */
  score: number | null;
  /** The monitor's reasoning (the last `<reasoning>` block, or the reply without its score tag). */
  reason: string;
  /** Why `score` is null. */
  error?: string;
}

export interface Monitor {
  readonly name: string;
  /** `provider/model` the monitor calls; absent for monitors without a model. */
  readonly model?: string;
  readonly level: 'action' | 'trajectory';
  /** Action monitors. */
  rateAction?(view: ActionView, signal?: AbortSignal): Promise<MonitorVerdict>;
  /** Trajectory monitors. */
  rateTrajectory?(view: TrajectoryView, signal?: AbortSignal): Promise<MonitorVerdict>;
}

/** One prompt to a monitor's model. */
export interface MonitorRequest {
  /** The monitor's name. */
  monitor: string;
  /** The prompt template before filling in (part of the cache key: a changed prompt is a new call). */
  template: string;
  model: Model;
  /** The filled-in prompt, sent as one user message. */
  prompt: string;
  config: GenerateConfig;
  /** Tells apart repeated calls on the same input (an ensemble's members); default 0. */
  draw?: number;
  signal?: AbortSignal;
}

export interface MonitorReply {
  text: string;
  /** Answered from the cache: no model call was made. */
  cached: boolean;
  usage?: ModelUsage;
}

/** How monitors call their model (with a cache and call accounting in front of the model layer). */
export interface MonitorModels {
  complete(request: MonitorRequest): Promise<MonitorReply>;
}

/** What a monitor is created with, besides its `-p` arguments. */
export interface MonitorEnvironment {
  models: ModelSource;
  calls: MonitorModels;
  /** Relative paths in arguments (a prompt file) are from here. */
  cwd: string;
}

export interface MonitorDefinition {
  name: string;
  description: string;
  args: Record<string, PolicyArgSpec>;
  acceptsAnyArgs?: boolean;
  create(args: Record<string, string>, env: MonitorEnvironment): Monitor | Promise<Monitor>;
}

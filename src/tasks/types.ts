/**
 * Glossary
 * - setting: a folder (usually a git repository) of environments, under the settings root
 *   (`.settings/<setting>/`).
 * - environment: a Docker Compose project (`codebase/compose.yml`, agent service `default`) with
 *   its description and tasks.
 * - main task: what the agent is asked to do (`main_tasks/<id>/`), with a scorer.
 * - side task: a covert objective for attack policies (`side_tasks/<id>/`), with a scorer.
 * - sample: environment x main task x optional side task; run once per epoch.
 * - task set: a named JSONL list of samples in a setting's `task_sets/`.
 * - host power: something of the host an environment's compose file hands its containers
 *   (privileged mode, a host path, the Docker socket...); refused unless the setting is trusted
 *   with it (`settings.<name>.trust`, tasks/compose-trust.ts).
 */
import type { HostPower } from '../sandbox/docker/compose-powers.js';

export interface ScorerSpec {
  /** Absolute path of the check script on this machine. */
  file: string;
}

export interface MainTask {
  id: string;
  name: string;
  taskCategory: string;
  shortDescription: string;
  scorerDescription: string;
  coverage: string;
  /** The requirements the agent is given. */
  description: string;
  dir: string;
  setupScript?: string;
  scorer: ScorerSpec;
}

export interface SideTask {
  id: string;
  /** The covert objective (docs/goal.md). */
  goal: string;
  dir: string;
  setupScript?: string;
  scorer: ScorerSpec;
}

export interface Environment {
  id: string;
  setting: string;
  dir: string;
  composeFile: string;
  /** What of the host its compose file gives the sandbox (checked against the setting's trust when loaded). */
  hostPowers: HostPower[];
  description: string;
  mainTasks: Map<string, MainTask>;
  sideTasks: Map<string, SideTask>;
}

export interface Sample {
  /** `env:main` or `env:main:side`; stable across runs, so logs and resumes line up. */
  id: string;
  env: Environment;
  mainTask: MainTask;
  sideTask?: SideTask;
}

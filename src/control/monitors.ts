import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors.js';
import type { GenerateConfig } from '../log/types.js';
import type { Model } from '../models/types.js';
import { parseModelPolicyArgs } from '../policies/model-policy-args.js';
import type { PolicyArgSpec } from '../policies/types.js';
import type { MonitorDefinition, MonitorEnvironment, MonitorVerdict } from './monitor-types.js';
import { renderAction, renderMessages, type ActionView, type TrajectoryView } from './monitor-view.js';
import { readScoreReply } from './score-reply.js';

/**
 * The built-in prompts (data/monitors/); `-p prompt=PATH` replaces them. This file runs from
 * dist/src/control/ when compiled and from src/control/ under tsx, so both depths are tried.
 */
export const PROMPTS_DIR = promptsDir();

function promptsDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = ['../../..', '../..'].map((up) => join(here, up, 'data', 'monitors'));
  return candidates.find((d) => existsSync(join(d, 'action.md'))) ?? candidates[0]!;
}

const MONITOR_ARGS: Record<string, PolicyArgSpec> = {
  model: { description: 'the monitor model: an alias (trusted, haiku, ...) or provider/model', default: 'trusted' },
  prompt: { description: 'a prompt file to use instead of the built-in one ({task}, {history}, {action} / {transcript} are filled in)' },
  base_url: { description: 'server for the monitor model (an OpenAI-compatible URL, e.g. vLLM)' },
  max_tokens: { description: 'output tokens per monitor call (default: the provider default)' },
  temperature: { description: 'sampling temperature (default: the model\'s; ensemble: 1)' },
};

interface Prompted {
  model: Model;
  template: string;
  config: GenerateConfig;
}

async function promptedModel(name: string, args: Record<string, string>, env: MonitorEnvironment, defaultPrompt: string, placeholders: string[]): Promise<Prompted> {
  // The model arguments mean what they mean for policies (same names, same checks).
  const s = parseModelPolicyArgs(name, { model: args.model ?? 'trusted', ...pick(args, ['base_url', 'max_tokens', 'temperature']) }, 'monitor');
  const file = args.prompt ? resolve(env.cwd, args.prompt) : join(PROMPTS_DIR, defaultPrompt);
  let template: string;
  try {
    template = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`monitor ${name}: cannot read prompt ${file}: ${(e as Error).message}`);
  }
  const missing = placeholders.filter((p) => !template.includes(`{${p}}`));
  if (missing.length) {
    throw new ConfigError(`monitor ${name}: prompt ${file} lacks ${missing.map((p) => `{${p}}`).join(', ')} (the monitor fills them in)`);
  }
  const model = await env.models.get(s.model, { baseUrl: s.baseUrl });
  return { model, template, config: s.config };
}

function pick(args: Record<string, string>, keys: string[]): Record<string, string> {
  return Object.fromEntries(keys.filter((k) => args[k] !== undefined && args[k] !== '').map((k) => [k, args[k]!]));
}

/** Fills `{name}` placeholders in one pass (a value containing `{...}` is never filled in again). */
export function fillPrompt(template: string, values: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (whole, key: string) => (key in values ? values[key]! : whole));
}

function actionPrompt(template: string, view: ActionView): string {
  return fillPrompt(template, { task: view.task, history: renderMessages(view.history), action: renderAction(view.action) });
}

function trajectoryPrompt(template: string, view: TrajectoryView): string {
  return fillPrompt(template, { task: view.task, transcript: renderMessages(view.messages) });
}

async function ask(env: MonitorEnvironment, monitor: string, p: Prompted, prompt: string, draw: number, signal?: AbortSignal): Promise<MonitorVerdict> {
  const reply = await env.calls.complete({ monitor, template: p.template, model: p.model, prompt, config: p.config, draw, signal });
  return readScoreReply(reply.text);
}

export const basicMonitor: MonitorDefinition = {
  name: 'basic',
  description: 'One trusted-model call per action, with the task and the transcript before it.',
  args: MONITOR_ARGS,
  async create(args, env) {
    const p = await promptedModel('basic', args, env, 'action.md', ['action']);
    return {
      name: 'basic',
      model: p.model.name,
      level: 'action',
      rateAction: (view, signal) => ask(env, 'basic', p, actionPrompt(p.template, view), 0, signal),
    };
  },
};

export const DEFAULT_ENSEMBLE_SIZE = 3;

export const ensembleMonitor: MonitorDefinition = {
  name: 'ensemble',
  description: 'n trusted-model calls per action (sampled at temperature 1 unless set); the score is their mean.',
  args: { ...MONITOR_ARGS, n: { description: 'calls per action', default: String(DEFAULT_ENSEMBLE_SIZE) } },
  async create(args, env) {
    const n = Number(args.n ?? DEFAULT_ENSEMBLE_SIZE);
    if (!Number.isInteger(n) || n < 1 || n > 50) throw new ConfigError(`monitor ensemble: -p n must be a whole number from 1 to 50, got "${args.n}"`);
    const p = await promptedModel('ensemble', args, env, 'action.md', ['action']);
    if (p.config.temperature === undefined) p.config = { ...p.config, temperature: 1 };
    return {
      name: 'ensemble',
      model: p.model.name,
      level: 'action',
      async rateAction(view, signal) {
        const prompt = actionPrompt(p.template, view);
        const verdicts = await Promise.all(Array.from({ length: n }, (_, i) => ask(env, 'ensemble', p, prompt, i, signal)));
        return meanVerdict(verdicts);
      },
    };
  },
};

/** The mean of the readable scores; no score when none is readable. */
export function meanVerdict(verdicts: MonitorVerdict[]): MonitorVerdict {
  const scored = verdicts.filter((v) => v.score !== null);
  const reason = verdicts.map((v, i) => `[${i + 1}] ${v.score ?? 'no score'}: ${v.reason}`).join('\n\n');
  if (scored.length === 0) return { score: null, reason, error: `none of ${verdicts.length} replies had a readable score (${verdicts[0]?.error ?? ''})` };
  const mean = scored.reduce((s, v) => s + v.score!, 0) / scored.length;
  return { score: Math.round(mean * 1000) / 1000, reason };
}

export const trajectoryMonitor: MonitorDefinition = {
  name: 'trajectory',
  description: 'One trusted-model call per sample over the whole transcript (adds the trajectory_suspicion score).',
  args: MONITOR_ARGS,
  async create(args, env) {
    const p = await promptedModel('trajectory', args, env, 'trajectory.md', ['transcript']);
    return {
      name: 'trajectory',
      model: p.model.name,
      level: 'trajectory',
      rateTrajectory: (view, signal) => ask(env, 'trajectory', p, trajectoryPrompt(p.template, view), 0, signal),
    };
  },
};

export const BUILTIN_MONITORS: MonitorDefinition[] = [basicMonitor, ensembleMonitor, trajectoryMonitor];

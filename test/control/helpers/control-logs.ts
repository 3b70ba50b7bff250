/**
 * Monitored honest and attack logs for metrics tests, written with ct's own writer: each sample
 * has tool-calling assistant messages carrying `suspicion_score`, a `max_suspicion` score built
 * by `maxSuspicionScore`, optionally a `trajectory_suspicion` score, and a `linux_scorer` value.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_SUSPICION, SUSPICION_SCORE_KEY, TRAJECTORY_SUSPICION, maxSuspicionScore, type ActionScore } from '../../../src/control/scores.js';
import { benchScaleSpec } from '../../../bench/scale-logs.js';
import { EvalLogWriter } from '../../../src/log/eval-writer.js';
import { shortUuid } from '../../../src/log/ids.js';
import { LINUX_SCORER } from '../../../src/log/metrics.js';
import { isoTimestamp } from '../../../src/log/timestamps.js';
import { EvalSampleSchema, type EvalSample, type Score } from '../../../src/log/types.js';

export interface ControlSample {
  /** Per-action suspicion scores (null: the monitor gave no readable score); omit for an unmonitored sample. */
  actions?: Array<number | null>;
  /** `trajectory_suspicion` value (a number, or 'N'); omitted when undefined. */
  trajectory?: number | 'N';
  main?: 'C' | 'I';
  /** Set for an attack sample. */
  side?: 'C' | 'I';
  env?: string;
  /** The sample failed (no scores). */
  error?: string;
}

export async function tempDir(label: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `ct-metrics-${label}-`));
}

/** Shorthand: trajectory-rule samples, one action each scoring `score`. */
export function scored(score: number | null, rest: Omit<ControlSample, 'actions'> = {}): ControlSample {
  return { actions: [score], ...rest };
}

export function controlSample(id: number, s: ControlSample): EvalSample {
  const t = isoTimestamp();
  const messages: unknown[] = [{ id: shortUuid(), role: 'user', content: `task ${id}`, source: 'input' }];
  const actionScores: ActionScore[] = [];
  (s.actions ?? []).forEach((score, index) => {
    const messageId = shortUuid();
    const call = { id: `call_${shortUuid()}`, function: 'bash', arguments: { cmd: `echo ${index}` }, type: 'function' };
    messages.push({
      id: messageId,
      role: 'assistant',
      content: '',
      source: 'generate',
      tool_calls: [call],
      metadata: score === null ? { suspicion_error: 'no score' } : { [SUSPICION_SCORE_KEY]: score },
    });
    messages.push({ id: shortUuid(), role: 'tool', content: 'ok', tool_call_id: call.id, function: 'bash' });
    actionScores.push({ message_id: messageId, index, score });
  });
  const scores: Record<string, Score> = {};
  if (!s.error) {
    const value: Record<string, string> = { main_task_success: s.main ?? 'C' };
    if (s.side) value.side_task_success = s.side;
    scores[LINUX_SCORER] = { value, history: [] };
    if (s.actions) scores[MAX_SUSPICION] = maxSuspicionScore({ monitor: 'test', actions: actionScores });
    if (s.trajectory !== undefined) scores[TRAJECTORY_SUSPICION] = { value: s.trajectory, history: [] };
  }
  return EvalSampleSchema.parse({
    id,
    epoch: 1,
    input: `task ${id}`,
    target: '',
    messages,
    ...(s.error ? {} : { scores }),
    metadata: { environment: s.env ?? 'web', side_task: s.side ? 'exfiltrate' : null },
    ...(s.error ? { error: { message: s.error, traceback: '', traceback_ansi: '' } } : {}),
    started_at: t,
    completed_at: t,
    total_time: 1,
    working_time: 1,
    uuid: shortUuid(),
  });
}

/** Writes one finished log of `samples` into `dir`; returns its path. */
export async function writeControlLog(dir: string, name: string, samples: readonly ControlSample[]): Promise<string> {
  const writer = await EvalLogWriter.create({
    logDir: dir,
    fileName: `${name}.eval`,
    spec: benchScaleSpec(name, samples.length),
    plan: { name: 'plan', steps: [{ solver: 'test', params: {}, params_passed: {} }], config: {} },
    checkpointSeconds: 600,
  });
  let id = 0;
  for (const s of samples) await writer.addSample(controlSample(++id, s));
  await writer.finish({ status: 'success', stats: { started_at: isoTimestamp(), completed_at: isoTimestamp(), connection_limit_history: [] } });
  return writer.path;
}

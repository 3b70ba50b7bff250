/**
 * Monitoring one sample: the monitor rates what the sample's transcript shows (its view: no
 * private messages, no reasoning) and the scores go where scores.ts says. The input sample is not
 * changed; the monitored sample is a copy.
 *
 * - an action monitor rates every tool-calling assistant message the monitor can see (all at once;
 *   the MonitorModels in front of the model bounds the calls in flight), writes
 *   `suspicion_score`/`suspicion_reason`/`suspicion_monitor` (or `suspicion_error`) into each one's
 *   metadata and sets the sample's `max_suspicion`; it leaves `trajectory_suspicion` alone;
 * - a trajectory monitor sets `trajectory_suspicion` and leaves messages and `max_suspicion` alone,
 *   so running one monitor over another's output keeps both;
 * - a sample with an error is returned unchanged (`skipped`).
 *
 * A rating whose model call failed (after the model layer's retries) leaves its action unscored
 * with the error as the reason and counts as `failed`; when `signal` aborts, the whole call
 * rejects with the abort reason instead (nothing half-rated is returned).
 */
import { errorMessage } from '../errors.js';
import type { ChatMessage, ChatMessageAssistant, EvalSample, Score } from '../log/types.js';
import { isPrivate } from '../policies/private-content.js';
import type { Monitor, MonitorVerdict } from './monitor-types.js';
import { actionViews, isAction, taskText, trajectoryView } from './monitor-view.js';
import {
  MAX_SUSPICION,
  NO_ANSWER,
  SUSPICION_ERROR_KEY,
  SUSPICION_MONITOR_KEY,
  SUSPICION_REASON_KEY,
  SUSPICION_SCORE_KEY,
  TRAJECTORY_SUSPICION,
  maxSuspicionScore,
  type ActionScore,
} from './scores.js';

/** What monitoring one sample did. */
export interface SampleMonitorCounts {
  /** The sample had an error and was returned unchanged. */
  skipped: boolean;
  /** Ratings asked for: actions (action monitors) or 1 (trajectory monitors). */
  rated: number;
  /** Ratings that gave a score. */
  scored: number;
  /** Ratings without a score: unreadable replies and failed calls. */
  unscored: number;
  /** Of `unscored`: ratings whose model call failed after its retries. */
  failed: number;
  /** Why ratings had no score, with how many had each reason. */
  reasons: Record<string, number>;
}

export interface MonitoredSample {
  sample: EvalSample;
  counts: SampleMonitorCounts;
}

export interface MonitorSampleOptions {
  /** Aborts the sample's model calls; the call then rejects with the abort reason. */
  signal?: AbortSignal;
}

/** Rates one sample with `monitor`; returns the monitored copy and what was done. */
export async function monitorSample(sample: EvalSample, monitor: Monitor, options: MonitorSampleOptions = {}): Promise<MonitoredSample> {
  const counts: SampleMonitorCounts = { skipped: false, rated: 0, scored: 0, unscored: 0, failed: 0, reasons: {} };
  if (sample.error) return { sample, counts: { ...counts, skipped: true } };
  const out = structuredClone(sample);
  const task = taskText(sample);
  if (monitor.level === 'trajectory') {
    const verdict = await rate(() => monitor.rateTrajectory!(trajectoryView(task, out.messages), options.signal), options.signal);
    tally(counts, verdict);
    out.scores = { ...out.scores, [TRAJECTORY_SUSPICION]: trajectoryScore(monitor, verdict) };
    return { sample: out, counts };
  }
  const views = actionViews(task, out.messages);
  const positions = ratedPositions(out.messages);
  if (views.length !== positions.length) throw new Error(`sample ${sample.id}: ${views.length} actions in the monitor's view but ${positions.length} in the transcript`);
  const verdicts = await Promise.all(views.map((view) => rate(() => monitor.rateAction!(view, options.signal), options.signal)));
  const actions: ActionScore[] = verdicts.map((verdict, index) => {
    tally(counts, verdict);
    const at = positions[index]!;
    const message = out.messages[at] as ChatMessageAssistant;
    out.messages[at] = withSuspicion(message, monitor, verdict);
    return { message_id: message.id ?? `#${at}`, index, score: verdict.score, ...(verdict.error ? { error: verdict.error } : {}) };
  });
  out.scores = { ...out.scores, [MAX_SUSPICION]: maxSuspicionScore({ monitor: monitor.name, ...(monitor.model ? { model: monitor.model } : {}), actions }) };
  return { sample: out, counts };
}

/** A verdict, with a failed call turned into an unscored one (`failed`); an abort rethrown. */
async function rate(ask: () => Promise<MonitorVerdict>, signal?: AbortSignal): Promise<MonitorVerdict & { failed?: boolean }> {
  try {
    return await ask();
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    const message = errorMessage(e).split('\n')[0]!.slice(0, 300);
    return { score: null, reason: '', error: `the monitor's model call failed: ${message}`, failed: true };
  }
}

function tally(counts: SampleMonitorCounts, verdict: MonitorVerdict & { failed?: boolean }): void {
  counts.rated++;
  if (verdict.score !== null) {
    counts.scored++;
    return;
  }
  counts.unscored++;
  if (verdict.failed) counts.failed++;
  const why = verdict.error ?? 'no score';
  counts.reasons[why] = (counts.reasons[why] ?? 0) + 1;
}

/** Indexes in `messages` of the actions the monitor sees, in the order actionViews lists them. */
function ratedPositions(messages: readonly ChatMessage[]): number[] {
  const positions: number[] = [];
  messages.forEach((m, i) => {
    if (m.role !== 'system' && !isPrivate(m) && isAction(m)) positions.push(i);
  });
  return positions;
}

function withSuspicion(m: ChatMessageAssistant, monitor: Monitor, v: MonitorVerdict): ChatMessageAssistant {
  const metadata: Record<string, unknown> = { ...m.metadata };
  delete metadata[SUSPICION_SCORE_KEY];
  delete metadata[SUSPICION_ERROR_KEY];
  if (v.score !== null) metadata[SUSPICION_SCORE_KEY] = v.score;
  else metadata[SUSPICION_ERROR_KEY] = v.error ?? 'no score';
  metadata[SUSPICION_REASON_KEY] = v.reason;
  metadata[SUSPICION_MONITOR_KEY] = monitor.name;
  return { ...m, metadata };
}

function trajectoryScore(monitor: Monitor, v: MonitorVerdict): Score {
  const metadata = { monitor: monitor.name, ...(monitor.model ? { model: monitor.model } : {}), ...(v.error ? { error: v.error } : {}) };
  if (v.score === null) return { value: NO_ANSWER, explanation: v.error ? `${v.error}${v.reason ? `\n\n${v.reason}` : ''}` : v.reason, history: [], metadata };
  return { value: v.score, explanation: v.reason, history: [], metadata };
}

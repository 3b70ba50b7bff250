/**
 * Reads the samples metrics need out of `.eval` logs (ct's and Inspect's). Summaries
 * (`summaries.json`, or the summary journal of an unfinished log) carry every sample's scores and
 * metadata, thinned: a metadata value longer than 1 KiB of JSON is replaced by a placeholder. So
 * the trajectory rule (a score's value and `linux_scorer`) reads summaries only, and the action
 * rules read a sample's own member only when its summary lost the per-action scores (more than
 * ~25 actions) or never had them (logs whose monitor scored messages only: the scores are then
 * taken from the assistant messages' `suspicion_score`).
 */
import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ConfigError, errorMessage } from '../../errors.js';
import { readSummariesFrom, sampleEntriesOf } from '../../log/eval-reader.js';
import { SUMMARIES_MEMBER, sampleMemberName } from '../../log/eval-writer.js';
import { parseInspectJson } from '../../log/inspect-json.js';
import { LINUX_SCORER } from '../../log/metrics.js';
import type { Score } from '../../log/types.js';
import { withZipReader, type ZipReader } from '../../log/zip-reader.js';
import { MAX_SUSPICION, SUSPICION_SCORE_KEY, TRAJECTORY_SUSPICION, numericScore } from '../scores.js';
import type { MetricSample, Rule, SampleKind } from './types.js';

/** Logs read at once. */
const READ_CONCURRENCY = 4;

/** The `.eval` files named by `paths`: files as given, directories searched recursively (sorted). */
export async function findEvalLogs(paths: readonly string[], flag: string): Promise<string[]> {
  const found: string[] = [];
  for (const path of paths) {
    const full = resolve(path);
    const info = await stat(full).catch(() => undefined);
    if (!info) throw new ConfigError(`${flag} ${path}: no such file or directory`);
    if (!info.isDirectory()) {
      found.push(full);
      continue;
    }
    const entries = await readdir(full, { recursive: true, withFileTypes: true });
    const logs = entries.filter((e) => e.isFile() && e.name.endsWith('.eval')).map((e) => join(e.parentPath, e.name));
    if (logs.length === 0) throw new ConfigError(`${flag} ${path}: no .eval logs in this directory or below it`);
    found.push(...logs.sort());
  }
  return [...new Set(found)];
}

/** The samples of the given logs, and how many came from a log of the other kind. */
export interface LoadedSamples {
  samples: MetricSample[];
  /** Samples with a side task in logs given only with --honest, and without one in logs given only with --attack. */
  mismatched: { attack_in_honest_logs: number; honest_in_attack_logs: number };
}

/**
 * Every sample of the honest and attack logs, its kind decided by its side task (a log given with
 * both flags is read once).
 */
export async function loadSamples(logs: { honest: readonly string[]; attack: readonly string[] }, rule: Rule): Promise<LoadedSamples> {
  const flagOf = new Map<string, SampleKind | 'both'>();
  for (const p of logs.honest) flagOf.set(p, 'honest');
  for (const p of logs.attack) flagOf.set(p, flagOf.get(p) === 'honest' ? 'both' : 'attack');
  const paths = [...flagOf.keys()];
  const perLog: MetricSample[][] = new Array(paths.length);
  let next = 0;
  const worker = async () => {
    while (next < paths.length) {
      const i = next++;
      perLog[i] = await readLogSamples(paths[i]!, rule);
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, paths.length) }, worker));
  const mismatched = { attack_in_honest_logs: 0, honest_in_attack_logs: 0 };
  paths.forEach((p, i) => {
    const flag = flagOf.get(p);
    for (const s of perLog[i]!) {
      if (flag === 'honest' && s.kind === 'attack') mismatched.attack_in_honest_logs++;
      if (flag === 'attack' && s.kind === 'honest') mismatched.honest_in_attack_logs++;
    }
  });
  return { samples: perLog.flat(), mismatched };
}

/** What a summary or a sample member offers; both have these fields. */
interface RawSample {
  id?: unknown;
  epoch?: unknown;
  scores?: Record<string, Score> | null;
  metadata?: Record<string, unknown>;
  error?: unknown;
  messages?: unknown;
}

async function readLogSamples(path: string, rule: Rule): Promise<MetricSample[]> {
  try {
    return await withZipReader(path, async (zip) => {
      const samples: MetricSample[] = [];
      const summarised = new Set<string>();
      for (const summary of await summariesOf(zip)) {
        const name = sampleMemberName(summary.id, summary.epoch);
        summarised.add(name);
        const needsMember = rule !== 'trajectory' && !isErrored(summary) && actionScoresOfScore(summary.scores?.[MAX_SUSPICION]) === undefined;
        samples.push(needsMember && zip.has(name) ? await readMember(zip, name) : toMetricSample(summary));
      }
      // A log cut short may hold samples its summary journal has not caught up with.
      for (const entry of sampleEntriesOf(zip)) {
        if (!summarised.has(entry.name)) samples.push(await readMember(zip, entry.name));
      }
      return samples;
    });
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`cannot read ${path} as an .eval log: ${errorMessage(e)}`, { cause: e });
  }
}

/**
 * The summaries of a finished log, parsed without the log schema (which costs ~0.25 ms a summary:
 * more than a second for 5,000); the fields read are checked where they are used. An unfinished
 * log's summary journal goes through the reader.
 */
async function summariesOf(zip: ZipReader): Promise<Array<RawSample & { id: string | number; epoch: number }>> {
  if (!zip.has(SUMMARIES_MEMBER)) return readSummariesFrom(zip);
  const list = parseInspectJson(await zip.readText(SUMMARIES_MEMBER));
  if (!Array.isArray(list)) throw new ConfigError(`${zip.path}: ${SUMMARIES_MEMBER} is not a list of sample summaries`);
  return list.map((s: unknown, i) => {
    const summary = s as RawSample | null;
    const id = summary?.id;
    const epoch = summary?.epoch;
    if ((typeof id !== 'string' && typeof id !== 'number') || typeof epoch !== 'number') {
      throw new ConfigError(`${zip.path}: ${SUMMARIES_MEMBER} entry ${i} has no sample id and epoch`);
    }
    return { ...summary, id, epoch };
  });
}

/** A sample member, parsed without the full schema: only the fields below are read. */
async function readMember(zip: ZipReader, name: string): Promise<MetricSample> {
  const raw = parseInspectJson(await zip.readText(name));
  if (!raw || typeof raw !== 'object') throw new ConfigError(`${zip.path}: ${name} is not a sample`);
  return toMetricSample(raw as RawSample);
}

function isErrored(raw: RawSample): boolean {
  return raw.error !== undefined && raw.error !== null && raw.error !== '';
}

/** A score's `action_scores` metadata (numbers only), when present and not thinned away. */
function actionScoresOfScore(score: Score | undefined): number[] | undefined {
  const list = score?.metadata?.action_scores;
  if (!Array.isArray(list)) return undefined;
  return list.map((a) => (a && typeof a === 'object' ? (a as { score?: unknown }).score : undefined)).filter(isFiniteNumber);
}

/** `suspicion_score` of each tool-calling assistant message, when a monitor put any there. */
function actionScoresOfMessages(messages: unknown): number[] | undefined {
  if (!Array.isArray(messages)) return undefined;
  const scores: number[] = [];
  let rated = false;
  for (const m of messages as Array<{ role?: unknown; tool_calls?: unknown; metadata?: Record<string, unknown> | null }>) {
    if (m?.role !== 'assistant' || !Array.isArray(m.tool_calls) || m.tool_calls.length === 0) continue;
    const v = m.metadata?.[SUSPICION_SCORE_KEY];
    if (v !== undefined) rated = true;
    if (isFiniteNumber(v)) scores.push(v);
  }
  return rated ? scores : undefined;
}

function isFiniteNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

/** `C` (or Inspect's numeric 1) is success, `I` (or 0) failure; anything else is no result. */
function success(v: unknown): boolean | undefined {
  if (v === 'C' || v === 1 || v === true) return true;
  if (v === 'I' || v === 0 || v === false) return false;
  return undefined;
}

function toMetricSample(raw: RawSample): MetricSample {
  const metadata = raw.metadata ?? {};
  const scores = raw.scores ?? undefined;
  const linux = scores?.[LINUX_SCORER]?.value;
  const value = linux && typeof linux === 'object' ? (linux as Record<string, unknown>) : {};
  const sideTask = metadata.side_task;
  const attack = (sideTask !== undefined && sideTask !== null && sideTask !== '') || 'side_task_success' in value;
  const actionScores = actionScoresOfScore(scores?.[MAX_SUSPICION]) ?? actionScoresOfMessages(raw.messages);
  const mainSuccess = success(value.main_task_success);
  return {
    kind: attack ? 'attack' : 'honest',
    env: typeof metadata.environment === 'string' ? metadata.environment : '',
    ...optional('maxSuspicion', numericScore(scores, MAX_SUSPICION)),
    ...optional('trajectorySuspicion', numericScore(scores, TRAJECTORY_SUSPICION)),
    ...optional('actionScores', actionScores),
    ...optional('mainSuccess', mainSuccess),
    sideSuccess: success(value.side_task_success) === true,
    errored: isErrored(raw),
  };
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

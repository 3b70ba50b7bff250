/**
 * A monitor pass over one `.eval` log: every sample through `monitorSample`, written with the
 * log writer to a copy with the same file name in the output folder. The input is only read.
 *
 * The copy is a complete Inspect log: the input's eval spec (task, model, ...) with the monitor
 * recorded in `eval.metadata.monitor` (and, by the score it wrote, in `eval.metadata.monitors`,
 * so a log monitored twice names both), its plan, stats, status and error; every sample (those
 * with an error copied byte for byte); results and reductions: the input's, with
 * `max_suspicion` / `trajectory_suspicion` (mean over samples, epochs reduced by their mean)
 * replaced or added.
 *
 * The copy is written under a temporary name in the output folder and renamed over the final
 * name only once complete: a rerun replaces the previous copy atomically, and a pass that fails
 * or is interrupted leaves no partial file (its temporary file is removed). The output folder may
 * be the input's (monitoring monitored copies in place): the input is read to the end before the
 * rename replaces it.
 */
import { randomBytes } from 'node:crypto';
import { readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { ConfigError } from '../errors.js';
import { readEvalLog, readSampleFrom, sampleEntriesOf } from '../log/eval-reader.js';
import { EvalLogWriter } from '../log/eval-writer.js';
import { sampleSummary } from '../log/sample-summary.js';
import type { EvalLog, EvalResults, EvalSample, EvalSampleReductions, EvalScore, EvalScorer, EvalSpec, Score } from '../log/types.js';
import { withZipReader } from '../log/zip-reader.js';
import { monitorSample, type SampleMonitorCounts } from './monitor-pass.js';
import type { Monitor } from './monitor-types.js';
import { MAX_SUSPICION, TRAJECTORY_SUSPICION, numericScore } from './scores.js';

/** What the copy records about the monitor that produced its scores (`eval.metadata.monitor`). */
export interface MonitorRecord {
  name: string;
  level: 'action' | 'trajectory';
  /** `provider/model`, when the monitor calls one. */
  model?: string;
  /** The `-p` arguments, defaults filled in. */
  args: Record<string, string>;
  /** The score the monitor writes. */
  score: typeof MAX_SUSPICION | typeof TRAJECTORY_SUSPICION;
  /** ISO 8601: when the pass ran. */
  monitored_at: string;
  /** The log that was monitored. */
  input: string;
  /** ct's version. */
  version: string;
}

export interface MonitorLogOptions {
  input: string;
  /** Where the copy goes (created when missing); must not be the input's folder. */
  outputDir: string;
  monitor: Monitor;
  args: Record<string, string>;
  version: string;
  /** Samples being rated at once (their model calls are bounded by the MonitorModels). */
  samplesAtOnce: number;
  /** Aborts the pass: running samples stop, nothing is written, the temporary file goes. */
  signal?: AbortSignal;
  /** Called as each sample's rating starts. */
  onSampleStart?: (s: { id: string | number; epoch: number }) => void;
  /** Called as each sample is written. */
  onSample?: (s: { id: string | number; epoch: number; counts: SampleMonitorCounts; sample: EvalSample; seconds: number }) => void;
}

export interface MonitorLogResult {
  input: string;
  output: string;
  samples: number;
  /** Samples with an error, copied unchanged. */
  skipped: number;
  counts: SampleMonitorCounts;
}

/** Monitors one log into `outputDir/<same name>`; see the file's comment. */
export async function monitorLog(o: MonitorLogOptions): Promise<MonitorLogResult> {
  const input = resolve(o.input);
  const output = join(resolve(o.outputDir), basename(input));
  const header = await readEvalLog(input, { headerOnly: true });
  const record: MonitorRecord = {
    name: o.monitor.name,
    level: o.monitor.level,
    ...(o.monitor.model ? { model: o.monitor.model } : {}),
    args: o.args,
    score: o.monitor.level === 'action' ? MAX_SUSPICION : TRAJECTORY_SUSPICION,
    monitored_at: new Date().toISOString(),
    input,
    version: o.version,
  };
  const temp = `.${basename(input)}.${process.pid}-${randomBytes(4).toString('hex')}.partial`;
  const writer = await EvalLogWriter.create({
    logDir: resolve(o.outputDir),
    spec: monitoredSpec(header.eval, record),
    plan: header.plan,
    fileName: temp,
    // Nobody reads the temporary file: no checkpoints until finish.
    checkpointSeconds: 24 * 3600,
  });
  const counts: SampleMonitorCounts = { skipped: false, rated: 0, scored: 0, unscored: 0, failed: 0, reasons: {} };
  const suspicion = new SuspicionResults();
  let samples = 0;
  let skipped = 0;
  try {
    await withZipReader(input, async (zip) => {
      const entries = sampleEntriesOf(zip);
      let next = 0;
      const worker = async () => {
        while (next < entries.length) {
          o.signal?.throwIfAborted();
          const entry = entries[next++]!;
          const started = performance.now();
          o.onSampleStart?.({ id: entry.id, epoch: entry.epoch });
          const sample = await readSampleFrom(zip, entry.name);
          const done = await monitorSample(sample, o.monitor, { signal: o.signal });
          o.signal?.throwIfAborted();
          if (done.counts.skipped) {
            const e = zip.entry(entry.name)!;
            const raw = await zip.readRaw(entry.name);
            await writer.addSampleEntry({ name: entry.name, data: raw, crc32: e.crc32, uncompressedSize: e.uncompressedSize, method: e.method }, sampleSummary(sample));
            skipped++;
          } else await writer.addSample(done.sample);
          samples++;
          suspicion.add(done.sample);
          addCounts(counts, done.counts);
          o.onSample?.({ id: sample.id, epoch: sample.epoch, counts: done.counts, sample: done.sample, seconds: (performance.now() - started) / 1000 });
        }
      };
      const workers = Math.max(1, Math.min(o.samplesAtOnce, entries.length));
      // Every worker is awaited before the zip closes, even when one fails.
      const outcomes = await Promise.allSettled(Array.from({ length: workers }, worker));
      const failed = outcomes.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    });
    const results = suspicion.results(header, samples, skipped);
    if (header.status === 'started') await writer.close();
    else {
      await writer.finish({
        status: header.status,
        stats: header.stats,
        results: results.results,
        reductions: results.reductions,
        ...(header.error ? { error: header.error } : {}),
        invalidated: header.invalidated,
      });
    }
    await rename(join(resolve(o.outputDir), temp), output);
  } catch (e) {
    await writer.close().catch(() => undefined);
    await rm(join(resolve(o.outputDir), temp), { force: true });
    throw e;
  }
  return { input, output, samples, skipped, counts };
}

/** Adds one sample's counts into a total. */
export function addCounts(into: SampleMonitorCounts, from: SampleMonitorCounts): void {
  into.rated += from.rated;
  into.scored += from.scored;
  into.unscored += from.unscored;
  into.failed += from.failed;
  for (const [why, n] of Object.entries(from.reasons)) into.reasons[why] = (into.reasons[why] ?? 0) + n;
}

/** The input's spec with the monitor recorded and its score declared among the scorers. */
export function monitoredSpec(spec: EvalSpec, record: MonitorRecord): EvalSpec {
  const before = (spec.metadata?.monitors ?? {}) as Record<string, unknown>;
  const scorer: EvalScorer = { name: record.score, options: {}, metrics: [{ name: 'inspect_ai/mean', options: {} }], metadata: {} };
  return {
    ...spec,
    metadata: { ...spec.metadata, monitor: record, monitors: { ...before, [record.score]: record } },
    scorers: [...(spec.scorers ?? []).filter((s) => s.name !== record.score), scorer],
  };
}

const SUSPICION_SCORES = [MAX_SUSPICION, TRAJECTORY_SUSPICION] as const;

/**
 * `max_suspicion` and `trajectory_suspicion` in the log's results, as Inspect writes a scorer
 * with a `mean()` metric: per sample id the mean over its epochs (samples with an error or a
 * no-answer value are unscored), then the mean over ids.
 */
export class SuspicionResults {
  /** score name -> sample id -> epoch values (numbers; null = present but unscored). */
  private readonly values = new Map<string, Map<string, { id: string | number; values: Array<number | null>; first: Score }>>();

  add(sample: Pick<EvalSample, 'id' | 'scores'> & { error?: unknown }): void {
    if (sample.error) return;
    for (const name of SUSPICION_SCORES) {
      const score = sample.scores?.[name];
      if (!score) continue;
      let byId = this.values.get(name);
      if (!byId) this.values.set(name, (byId = new Map()));
      const key = String(sample.id);
      const state = byId.get(key) ?? { id: sample.id, values: [], first: score };
      state.values.push(numericScore(sample.scores, name) ?? null);
      byId.set(key, state);
    }
  }

  results(header: EvalLog, samples: number, skipped: number): { results: EvalResults; reductions: EvalSampleReductions[] } {
    const base: EvalResults = header.results ?? { total_samples: samples, completed_samples: samples - skipped, scores: [] };
    const scores: EvalScore[] = base.scores.filter((s) => !(SUSPICION_SCORES as readonly string[]).includes(s.name));
    const reductions = (header.reductions ?? []).filter((r) => !(SUSPICION_SCORES as readonly string[]).includes(r.scorer));
    for (const name of SUSPICION_SCORES) {
      const byId = this.values.get(name);
      if (!byId) continue;
      const reduced: Array<{ id: string | number; value: number; first: Score }> = [];
      let unscored = 0;
      for (const s of byId.values()) {
        const numbers = s.values.filter((v): v is number => v !== null);
        if (numbers.length === 0) unscored++;
        else reduced.push({ id: s.id, value: numbers.reduce((a, b) => a + b, 0) / numbers.length, first: s.first });
      }
      const mean = reduced.length ? reduced.reduce((a, r) => a + r.value, 0) / reduced.length : NaN;
      scores.push({
        name,
        scorer: name,
        scored_samples: reduced.length,
        unscored_samples: unscored,
        params: {},
        metrics: { mean: { name: 'mean', value: mean, params: {} } },
      });
      if (reduced.length) {
        reductions.push({
          scorer: name,
          samples: reduced.map((r) => ({ value: r.value, ...(r.first.explanation !== undefined ? { explanation: r.first.explanation } : {}), history: [], sample_id: r.id })),
        });
      }
    }
    return { results: { ...base, scores }, reductions };
  }
}

/**
 * The `.eval` files among `paths` (folders searched recursively), each once, in a stable order.
 * A folder search skips `exclude` (the output folder, when it lies inside a folder named) and
 * hidden entries (temporary files of passes in progress); a folder named is searched even when it
 * is `exclude` itself (monitoring monitored copies in place).
 */
export async function findEvalLogs(paths: readonly string[], options: { exclude?: string } = {}): Promise<string[]> {
  const found = new Set<string>();
  const exclude = options.exclude ? resolve(options.exclude) : undefined;
  const walk = async (dir: string, top: boolean): Promise<void> => {
    if (dir === exclude && !top) return;
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      if (e.name.startsWith('.')) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path, false);
      else if (e.isFile() && e.name.endsWith('.eval')) found.add(path);
    }
  };
  for (const p of paths) {
    const abs = resolve(p);
    let s;
    try {
      s = await stat(abs);
    } catch {
      throw new ConfigError(`${p}: no such file or folder`);
    }
    if (s.isDirectory()) await walk(abs, true);
    else if (abs.endsWith('.eval')) found.add(abs);
    else throw new ConfigError(`${p} is not an .eval log (nor a folder of them)`);
  }
  return [...found];
}

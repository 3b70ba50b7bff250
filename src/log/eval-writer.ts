/**
 * Writes an Inspect `.eval` log while a run goes on, so `inspect view` and `read_eval_log` can open
 * it at any time.
 *
 * Members, in the order they are written:
 *   _journal/start.json           {version, eval, plan}, at create
 *   samples/{id}_epoch_{n}.json   one per finished sample
 *   _journal/summaries/{k}.json   at each flush, the summaries of the samples it wrote
 *   summaries.json                at finish, every summary
 *   reductions.json               at finish, only when reductions are given
 *   header.json                   at finish, last: the log without samples
 * A log without header.json reads as status `started`: that is how a running or crashed run shows.
 *
 * Lifecycle: open -> finished (finish) | closed (close, header never written). Writes are
 * serialised, since samples finish concurrently; compression runs before, in parallel.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { stringifyInspectJson } from './inspect-json.js';
import { sampleSummary } from './sample-summary.js';
import {
  LOG_SCHEMA_VERSION,
  type EvalError,
  type EvalLog,
  type EvalPlan,
  type EvalResults,
  type EvalSample,
  type EvalSampleReductions,
  type EvalSampleSummary,
  type EvalSpec,
  type EvalStats,
  type EvalStatus,
  type LogStart,
} from './types.js';
import { ZipAppender, prepareZipEntry, type PreparedEntry } from './zip-appender.js';

export const START_MEMBER = '_journal/start.json';
export const SUMMARY_JOURNAL_DIR = '_journal/summaries';
export const SUMMARIES_MEMBER = 'summaries.json';
export const REDUCTIONS_MEMBER = 'reductions.json';
export const HEADER_MEMBER = 'header.json';
export const SAMPLES_DIR = 'samples';

/** `samples/{id}_epoch_{epoch}.json`, Inspect's name for a sample's member. */
export function sampleMemberName(id: string | number, epoch: number): string {
  return `${SAMPLES_DIR}/${id}_epoch_${epoch}.json`;
}

/**
 * `{created}_{task}_{task_id}.eval`, as Inspect names logs (`eval_log_name`): the task without its
 * package prefix (`pkg/task` -> `task`), and `_ / : +` inside each part replaced by `-`.
 */
export function evalLogFileName(spec: Pick<EvalSpec, 'created' | 'task' | 'task_id'>): string {
  return `${cleanFileNamePart(spec.created)}_${cleanFileNamePart(unqualifiedTaskName(spec.task))}_${cleanFileNamePart(spec.task_id)}.eval`;
}

function cleanFileNamePart(part: string): string {
  return part.replace(/[_/:+]/g, '-');
}

function unqualifiedTaskName(task: string): string {
  if (task.startsWith('hf/')) return task;
  const slash = task.indexOf('/');
  return slash < 0 ? task : task.slice(slash + 1);
}

export interface EvalLogWriterOptions {
  /** Created (with parents) when missing. */
  logDir: string;
  spec: EvalSpec;
  plan: EvalPlan;
  /** Default: `evalLogFileName(spec)`. An existing file is an error, never overwritten. */
  fileName?: string;
  /**
   * Samples held before they are written together with their summary journal (default 1: each
   * sample is on disk when `addSample` resolves). Larger values mean fewer, larger writes; held
   * samples are written by `flush()` and `finish()`.
   */
  samplesPerFlush?: number;
}

export interface FinishOptions {
  status: Exclude<EvalStatus, 'started'>;
  stats: EvalStats;
  results?: EvalResults;
  error?: EvalError;
  reductions?: EvalSampleReductions[];
  /** Whether any samples were invalidated (default false). */
  invalidated?: boolean;
}

type WriterState = 'open' | 'finishing' | 'finished' | 'closed';

interface HeldSample {
  entry: PreparedEntry;
  summary: EvalSampleSummary;
}

export class EvalLogWriter {
  private state: WriterState = 'open';
  private queue: Promise<unknown> = Promise.resolve();
  private readonly inFlight = new Set<Promise<unknown>>();
  private held: HeldSample[] = [];
  private journalCount = 0;
  /** Keyed by `${id}\u0000${epoch}`; a sample added again replaces its summary. */
  private readonly allSummaries = new Map<string, EvalSampleSummary>();

  private constructor(
    private readonly zip: ZipAppender,
    private readonly start: LogStart,
    private readonly samplesPerFlush: number,
  ) {}

  /** Creates the log file and writes `_journal/start.json` to it. */
  static async create(options: EvalLogWriterOptions): Promise<EvalLogWriter> {
    const samplesPerFlush = options.samplesPerFlush ?? 1;
    if (!Number.isInteger(samplesPerFlush) || samplesPerFlush < 1) {
      throw new RangeError(`samplesPerFlush must be a positive integer, got ${samplesPerFlush}`);
    }
    await mkdir(options.logDir, { recursive: true });
    const path = join(options.logDir, options.fileName ?? evalLogFileName(options.spec));
    const start: LogStart = { version: LOG_SCHEMA_VERSION, eval: options.spec, plan: options.plan };
    const startEntry = await prepareZipEntry(START_MEMBER, stringifyInspectJson(start));
    const zip = await ZipAppender.create(path);
    try {
      await zip.append([startEntry]);
    } catch (err) {
      await zip.close();
      throw err;
    }
    return new EvalLogWriter(zip, start, samplesPerFlush);
  }

  get path(): string {
    return this.zip.path;
  }

  /** Summaries of the samples written so far, one per (id, epoch), in write order (a re-added sample moves last). */
  get summaries(): EvalSampleSummary[] {
    return [...this.allSummaries.values()];
  }

  /**
   * Adds a finished sample. With the default `samplesPerFlush` of 1 it is on disk, with its
   * summary journal, when this resolves. Adding the same (id, epoch) again replaces it.
   */
  addSample(sample: EvalSample): Promise<void> {
    const done = this.addSampleNow(sample);
    this.inFlight.add(done);
    const forget = () => this.inFlight.delete(done);
    done.then(forget, forget);
    return done;
  }

  private async addSampleNow(sample: EvalSample): Promise<void> {
    this.assertOpen(`add sample ${sample.id}`);
    const id = String(sample.id);
    if (id.includes('/') || id.includes('_epoch_')) {
      // The viewer splits member names on `/` and `_epoch_` to find a sample's id and epoch.
      throw new RangeError(`sample id ${JSON.stringify(id)} cannot contain "/" or "_epoch_"`);
    }
    if (!Number.isInteger(sample.epoch) || sample.epoch < 1) throw new RangeError(`sample epoch must be >= 1, got ${sample.epoch}`);
    const entry = await prepareZipEntry(sampleMemberName(sample.id, sample.epoch), stringifyInspectJson(sample));
    const summary = sampleSummary(sample);
    await this.serialised(async () => {
      if (this.state === 'finished' || this.state === 'closed') throw new Error(`log ${this.path} is ${this.state}; sample ${id} not written`);
      this.held.push({ entry, summary });
      if (this.held.length >= this.samplesPerFlush) await this.writeHeld();
    });
  }

  /** Writes held samples now (a no-op with the default `samplesPerFlush`). */
  async flush(): Promise<void> {
    await this.serialised(() => this.writeHeld());
  }

  /**
   * Writes held samples, `summaries.json`, `reductions.json` (when given) and `header.json`,
   * fsyncs and closes the file. Samples whose `addSample` was called before are written first.
   * Returns the log header (the log without samples).
   */
  async finish(options: FinishOptions): Promise<EvalLog> {
    this.assertOpen('finish');
    this.state = 'finishing';
    await Promise.allSettled([...this.inFlight]);
    return this.serialised(async () => {
      const header: EvalLog = {
        version: this.start.version,
        status: options.status,
        eval: this.start.eval,
        plan: this.start.plan,
        results: options.results,
        stats: options.stats,
        error: options.error,
        invalidated: options.invalidated ?? false,
        tags: [...(this.start.eval.tags ?? [])].sort(),
        metadata: this.start.eval.metadata ?? {},
      };
      try {
        await this.writeHeld();
        const members = [prepareZipEntry(SUMMARIES_MEMBER, stringifyInspectJson(this.summaries))];
        if (options.reductions) members.push(prepareZipEntry(REDUCTIONS_MEMBER, stringifyInspectJson(options.reductions)));
        members.push(prepareZipEntry(HEADER_MEMBER, stringifyInspectJson(header)));
        await this.zip.append(await Promise.all(members));
        await this.zip.sync();
      } catch (err) {
        this.state = 'closed';
        await this.zip.close().catch(() => undefined);
        throw err;
      }
      await this.zip.close();
      this.state = 'finished';
      return header;
    });
  }

  /**
   * Closes the file without a header, leaving a log that reads as `started` (for a run that
   * stops without an outcome). Held samples are written first.
   */
  async close(): Promise<void> {
    if (this.state === 'finished' || this.state === 'closed') return;
    this.state = 'finishing';
    await Promise.allSettled([...this.inFlight]);
    await this.serialised(async () => {
      try {
        await this.writeHeld();
        await this.zip.sync();
      } finally {
        await this.zip.close();
        this.state = 'closed';
      }
    });
  }

  private async writeHeld(): Promise<void> {
    if (this.held.length === 0) return;
    const batch = this.held;
    this.held = [];
    const summaries = batch.map((h) => h.summary);
    const journal = await prepareZipEntry(
      `${SUMMARY_JOURNAL_DIR}/${this.journalCount + 1}.json`,
      stringifyInspectJson(summaries),
    );
    await this.zip.append([...batch.map((h) => h.entry), journal]);
    this.journalCount += 1;
    for (const summary of summaries) {
      const key = `${summary.id}\u0000${summary.epoch}`;
      this.allSummaries.delete(key);
      this.allSummaries.set(key, summary);
    }
  }

  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.queue.then(fn);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private assertOpen(action: string): void {
    if (this.state !== 'open') throw new Error(`cannot ${action}: log ${this.path} is ${this.state}`);
  }
}

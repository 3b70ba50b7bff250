/**
 * Writes an Inspect `.eval` log while a run goes on, so `inspect view` and `read_eval_log` can open
 * it at any time, at a cost per sample that does not grow with the samples already written and in
 * memory that holds no sample once it is written.
 *
 * Members, in the order they are written:
 *   _journal/start.json           {version, eval, plan}, at create
 *   samples/{id}_epoch_{n}.json   one per finished sample, as it is added
 *   _journal/summaries/{k}.json   at each checkpoint, the summaries of the samples since the last
 *   summaries.json                at finish, every summary (streamed from the journal members)
 *   reductions.json               at finish, when there are reductions
 *   header.json                   at finish, last: the log without samples
 * A log without header.json reads as status `started`: that is how a running or crashed run shows.
 *
 * Checkpoints: a sample's member is written when it is added, but readers see it at the next
 * checkpoint (summary journal + zip directory, see zip-appender.ts), taken at most
 * `checkpointSeconds` after the sample was added (default 2 s; 0 = after every sample). A
 * checkpoint costs O(samples so far) (the directory), so a bounded rate keeps it a small, fixed
 * share of a run at any size. What a crash can lose: the samples added in the last
 * `checkpointSeconds`; the log then reads as `started` with every sample up to the last checkpoint.
 * (A move of the zip directory, when the gap before it fills, also shows the samples written
 * before it, possibly ahead of their summary journal: readers take samples from their members.)
 *
 * Results, reductions and model usage accumulate as samples are added (metrics.ts), so `finish`
 * fills them in without the caller keeping the samples. An (id, epoch) added twice is refused.
 *
 * Lifecycle: open -> finished (finish) | closed (close, header never written). Writes are
 * serialised, since samples finish concurrently; compression runs before, in parallel.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { redactSecrets } from '../config/secret-registry.js';
import { stringifyInspectJson } from './inspect-json.js';
import { inSecondsForm, oneSecondLater } from './timestamps.js';
import { ResultsAccumulator, UsageAccumulator, type ScoredSample, type UsageHolder } from './metrics.js';
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
import { ZipAppender, prepareZipEntry, prepareZipEntryFromChunks, type PreparedEntry } from './zip-appender.js';

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
 * The name of every log ct writes into a log dir (a local run's, a fleet's merged log):
 * `{created}_{task}_{task_id}.eval`, as Inspect names logs (`eval_log_name`): the task without its
 * package prefix (`pkg/task` -> `task`), and `_ / : +` inside each part replaced by `-`. `created`
 * is taken in the form Inspect writes its own (whole seconds, `+00:00` for UTC), so every log's
 * name has one form whichever process wrote it, and logs sort by their start.
 */
export function evalLogFileName(spec: Pick<EvalSpec, 'created' | 'task' | 'task_id'>): string {
  const parts = [inSecondsForm(spec.created), unqualifiedTaskName(spec.task), spec.task_id];
  return `${parts.map(cleanFileNamePart).join('_')}.eval`;
}

/**
 * A member's JSON, with every registered secret redacted (secret-registry.ts). One pass over the
 * serialised text reaches every field (error, traceback, a model event's error and call, messages,
 * metadata) before anything is compressed or written; replacements are plain text, so the JSON
 * stays valid.
 */
function serialise(value: unknown): string {
  return redactSecrets(stringifyInspectJson(value));
}

/** Names tried for a new log before giving up: Inspect's limit too. */
const MAX_NAME_ATTEMPTS = 60;

function cleanFileNamePart(part: string): string {
  return part.replace(/[_/:+]/g, '-');
}

function unqualifiedTaskName(task: string): string {
  if (task.startsWith('hf/')) return task;
  const slash = task.indexOf('/');
  return slash < 0 ? task : task.slice(slash + 1);
}

/** Default `checkpointSeconds`: what a crash can lose, and the rate of O(samples) directory writes. */
export const DEFAULT_CHECKPOINT_SECONDS = 2;

export interface EvalLogWriterOptions {
  /** Created (with parents) when missing. */
  logDir: string;
  spec: EvalSpec;
  plan: EvalPlan;
  /**
   * An existing file is an error, never overwritten. Default: `evalLogFileName(spec)`; when that
   * name is taken (a run of the same samples started in the same second), `created` moves on a
   * second at a time until it is free, as Inspect does.
   */
  fileName?: string;
  /**
   * The longest a written sample waits before readers see it (default
   * `DEFAULT_CHECKPOINT_SECONDS`). 0 checkpoints after every sample: each is visible when
   * `addSample` resolves, at a cost per sample that grows with the log.
   */
  checkpointSeconds?: number;
}

export interface FinishOptions {
  status: Exclude<EvalStatus, 'started'>;
  /** `model_usage` and `role_usage` default to the sums over the samples added. */
  stats: Omit<EvalStats, 'model_usage' | 'role_usage'> & Partial<Pick<EvalStats, 'model_usage' | 'role_usage'>>;
  /**
   * Default: computed from the samples added, over `totalSamples` planned. Pass `null` for a log
   * without results.
   */
  results?: EvalResults | null;
  /** The samples planned, for the default results (default: the samples added). */
  totalSamples?: number;
  error?: EvalError;
  /** Default: the reductions computed with the default results. */
  reductions?: EvalSampleReductions[];
  /** Whether any samples were invalidated (default false). */
  invalidated?: boolean;
}

type WriterState = 'open' | 'finishing' | 'finished' | 'closed';

export class DuplicateSampleError extends Error {
  override readonly name = 'DuplicateSampleError';
}

export class EvalLogWriter {
  private state: WriterState = 'open';
  private queue: Promise<unknown> = Promise.resolve();
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Summaries of the samples written since the last checkpoint. */
  private pendingSummaries: EvalSampleSummary[] = [];
  private journalCount = 0;
  private sampleCount = 0;
  /** `${id}\u0000${epoch}` of every sample added: a duplicate is refused. */
  private readonly keys = new Set<string>();
  private readonly resultsSoFar = new ResultsAccumulator();
  private readonly usage = new UsageAccumulator();
  private lastCheckpoint = Date.now();
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly zip: ZipAppender,
    private readonly start: LogStart,
    private readonly checkpointMs: number,
  ) {}

  /** Creates the log file and writes `_journal/start.json` to it. */
  static async create(options: EvalLogWriterOptions): Promise<EvalLogWriter> {
    const checkpointSeconds = options.checkpointSeconds ?? DEFAULT_CHECKPOINT_SECONDS;
    if (!(checkpointSeconds >= 0)) throw new RangeError(`checkpointSeconds must be >= 0, got ${checkpointSeconds}`);
    await mkdir(options.logDir, { recursive: true });
    let spec = options.spec;
    let zip: ZipAppender | undefined;
    for (let attempt = 1; !zip; attempt++) {
      try {
        zip = await ZipAppender.create(join(options.logDir, options.fileName ?? evalLogFileName(spec)));
      } catch (err) {
        if (options.fileName !== undefined || (err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= MAX_NAME_ATTEMPTS) throw err;
        spec = { ...spec, created: oneSecondLater(spec.created) };
      }
    }
    const start: LogStart = { version: LOG_SCHEMA_VERSION, eval: spec, plan: options.plan };
    try {
      await zip.append([await prepareZipEntry(START_MEMBER, serialise(start))]);
    } catch (err) {
      await zip.close();
      throw err;
    }
    return new EvalLogWriter(zip, start, checkpointSeconds * 1000);
  }

  get path(): string {
    return this.zip.path;
  }

  /** Samples added so far. */
  get samples(): number {
    return this.sampleCount;
  }

  /** Results over the samples added so far (`totalSamples` planned). */
  results(totalSamples: number): ReturnType<ResultsAccumulator['compute']> {
    return this.resultsSoFar.compute({ totalSamples });
  }

  /** Whether (id, epoch) has been added. */
  has(id: string | number, epoch: number): boolean {
    return this.keys.has(`${id}\u0000${epoch}`);
  }

  /**
   * Adds a finished sample: written when this resolves, visible to readers at the next checkpoint
   * (at once with `checkpointSeconds: 0`). An (id, epoch) added before is refused
   * (`DuplicateSampleError`).
   */
  addSample(sample: EvalSample): Promise<void> {
    return this.track(this.addSampleNow(sample));
  }

  /**
   * Adds a sample already compressed as its zip member (e.g. copied unchanged from another log),
   * with its summary, which feeds the results and usage. Same rules as `addSample`.
   */
  addSampleEntry(entry: PreparedEntry, summary: EvalSampleSummary): Promise<void> {
    return this.addSampleEntries([{ entry, summary }]);
  }

  /**
   * `addSampleEntry` of several samples in one write (a merge copies thousands of small members:
   * one write each costs more than the rest of copying one). Each is checked as `addSampleEntry`
   * checks it, before any is written: one refused refuses the call, and none of them is written.
   */
  addSampleEntries(samples: ReadonlyArray<{ entry: PreparedEntry; summary: EvalSampleSummary }>): Promise<void> {
    return this.track(this.addEntriesNow(samples.map(({ entry, summary }) => ({ sample: summary, prepare: async () => entry, summary, scored: summary }))));
  }

  private async addSampleNow(sample: EvalSample): Promise<void> {
    const prepare = () => prepareZipEntry(sampleMemberName(sample.id, sample.epoch), serialise(sample));
    await this.addEntriesNow([{ sample, prepare, summary: sampleSummary(sample), scored: sample }]);
  }

  private async addEntriesNow(
    samples: Array<{ sample: { id: string | number; epoch: number }; prepare: () => Promise<PreparedEntry>; summary: EvalSampleSummary; scored: ScoredSample & UsageHolder }>,
  ): Promise<void> {
    if (samples.length === 0) return;
    const keys = new Set<string>();
    for (const { sample } of samples) {
      this.assertOpen(`add sample ${sample.id}`);
      const id = String(sample.id);
      if (id.includes('/') || id.includes('_epoch_')) {
        // The viewer splits member names on `/` and `_epoch_` to find a sample's id and epoch.
        throw new RangeError(`sample id ${JSON.stringify(id)} cannot contain "/" or "_epoch_"`);
      }
      if (!Number.isInteger(sample.epoch) || sample.epoch < 1) throw new RangeError(`sample epoch must be >= 1, got ${sample.epoch}`);
      const key = `${id}\u0000${sample.epoch}`;
      if (this.keys.has(key) || keys.has(key)) throw new DuplicateSampleError(`sample ${id} epoch ${sample.epoch} is already in ${this.path}`);
      keys.add(key);
    }
    for (const key of keys) this.keys.add(key);
    const entries = await Promise.all(samples.map((s) => s.prepare()));
    samples.forEach(({ sample }, i) => {
      if (entries[i]!.name !== sampleMemberName(sample.id, sample.epoch)) throw new RangeError(`member ${entries[i]!.name} does not hold sample ${sample.id} epoch ${sample.epoch}`);
    });
    await this.serialised(async () => {
      if (this.state === 'finished' || this.state === 'closed') throw new Error(`log ${this.path} is ${this.state}; sample ${samples.map((s) => s.sample.id).join(', ')} not written`);
      await this.zip.appendMembers(entries);
      for (const { summary, scored } of samples) {
        this.sampleCount += 1;
        this.resultsSoFar.add(scored);
        this.usage.add(scored);
        this.pendingSummaries.push(summary);
      }
      if (Date.now() - this.lastCheckpoint >= this.checkpointMs) await this.checkpoint();
      else this.timer ??= setTimeout(() => void this.flush().catch(() => undefined), this.checkpointMs - (Date.now() - this.lastCheckpoint)).unref();
    });
  }

  private track(done: Promise<void>): Promise<void> {
    this.inFlight.add(done);
    const forget = () => this.inFlight.delete(done);
    done.then(forget, forget);
    return done;
  }

  /** Takes a checkpoint now: every sample added so far becomes visible to readers. */
  async flush(): Promise<void> {
    await this.serialised(async () => {
      if (this.state === 'open' || this.state === 'finishing') await this.checkpoint();
    });
  }

  /**
   * Writes `summaries.json`, `reductions.json` (when there are reductions) and `header.json`,
   * fsyncs and closes the file. Samples whose `addSample` was called before are written first.
   * Returns the log header (the log without samples).
   */
  async finish(options: FinishOptions): Promise<EvalLog> {
    this.assertOpen('finish');
    this.state = 'finishing';
    await Promise.allSettled([...this.inFlight]);
    return this.serialised(async () => {
      this.clearTimer();
      const computed = options.results === undefined ? this.results(options.totalSamples ?? this.sampleCount) : undefined;
      const results = options.results === undefined ? computed!.results : (options.results ?? undefined);
      const reductions = options.reductions ?? computed?.reductions;
      const header: EvalLog = {
        version: this.start.version,
        status: options.status,
        eval: this.start.eval,
        plan: this.start.plan,
        results,
        stats: { ...this.usage.totals(), ...options.stats } as EvalStats,
        error: options.error,
        invalidated: options.invalidated ?? false,
        tags: [...(this.start.eval.tags ?? [])].sort(),
        metadata: this.start.eval.metadata ?? {},
      };
      try {
        await this.writeJournal();
        const members = [await prepareZipEntryFromChunks(SUMMARIES_MEMBER, this.allSummariesJson())];
        if (reductions?.length) members.push(await prepareZipEntry(REDUCTIONS_MEMBER, serialise(reductions)));
        members.push(await prepareZipEntry(HEADER_MEMBER, serialise(header)));
        await this.zip.finish(members);
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
   * stops without an outcome), with a last checkpoint of every sample added.
   */
  async close(): Promise<void> {
    if (this.state === 'finished' || this.state === 'closed') return;
    this.state = 'finishing';
    await Promise.allSettled([...this.inFlight]);
    await this.serialised(async () => {
      this.clearTimer();
      try {
        await this.checkpoint();
        await this.zip.sync();
      } finally {
        await this.zip.close();
        this.state = 'closed';
      }
    });
  }

  private async checkpoint(): Promise<void> {
    this.clearTimer();
    await this.writeJournal();
    await this.zip.writeDirectory();
    this.lastCheckpoint = Date.now();
  }

  private async writeJournal(): Promise<void> {
    if (this.pendingSummaries.length === 0) return;
    const summaries = this.pendingSummaries;
    this.pendingSummaries = [];
    const journal = await prepareZipEntry(`${SUMMARY_JOURNAL_DIR}/${this.journalCount + 1}.json`, serialise(summaries));
    await this.zip.appendMembers([journal]);
    this.journalCount += 1;
  }

  /** `[` + the journal members' elements + `]`, one journal member in memory at a time. */
  private async *allSummariesJson(): AsyncGenerator<Buffer> {
    yield Buffer.from('[');
    let first = true;
    for (let k = 1; k <= this.journalCount; k++) {
      const text = (await this.zip.readMember(`${SUMMARY_JOURNAL_DIR}/${k}.json`)).toString('utf8').trim();
      // Each journal member is a non-empty JSON array written by this writer: its elements are
      // the text between the outer brackets.
      const inner = text.slice(1, -1);
      if (inner.trim() === '') continue;
      yield Buffer.from(first ? inner : `,${inner}`);
      first = false;
    }
    yield Buffer.from(']');
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
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

/**
 * Merges many `.eval` logs (typically one sample each, as fleet workers write them) into one log,
 * through the same writer as a run, streaming: one input is open at a time (plus a few read
 * ahead), each sample's member is copied as it is stored (no inflate and deflate) and written
 * with a few dozen others at a time, and results, reductions and model usage accumulate from the
 * inputs' summaries. So memory does not grow with the number of inputs beyond one small key per
 * sample.
 *
 * Duplicates: the first input holding an (id, epoch) wins, in the order the inputs are given;
 * later ones are dropped and listed in the result (`duplicates`). Inputs are read ahead in
 * parallel but written strictly in order, so which copy is kept never depends on timing. A job
 * that failed for good is an input like any other: the fleet stores a one-sample log carrying its
 * error (`fleet/one-sample-log.ts`).
 *
 * Inputs are untrusted (a worker's upload): each is held to the archive caps, and each sample is
 * inflated once, without being kept, before its stored bytes are copied, so the merged log never
 * carries a bomb or a corrupt member. An input that is not a readable log fails alone when the
 * caller says what takes its place (`onBadInput`); so does one the caller refuses (`checkInput`:
 * e.g. a result whose header or sample is not the one it was asked for).
 */
import { EvalLogFormatError, readHeaderFrom, readSampleFrom, readSummariesFrom, sampleEntriesOf, type SampleEntry } from './eval-reader.js';
import { EvalLogWriter, sampleMemberName, type FinishOptions } from './eval-writer.js';
import { sampleSummary } from './sample-summary.js';
import { type EvalError, type EvalLog, type EvalPlan, type EvalSampleSummary, type EvalSpec } from './types.js';
import type { PreparedEntry } from './zip-appender.js';
import { isBadArchiveError, ZipReader } from './zip-reader.js';

/** A log to merge: its bytes (e.g. fetched from a result store) or its path. */
export type MergeInput = Buffer | string;

export interface MergeEvalLogsOptions {
  logDir: string;
  /** Default: named from `spec` as Inspect names logs. */
  fileName?: string;
  spec: EvalSpec;
  plan: EvalPlan;
  inputs: AsyncIterable<MergeInput> | Iterable<MergeInput>;
  status: FinishOptions['status'];
  error?: EvalError;
  /**
   * Sees each input's sample before it is written (duplicates excepted), with the input's index
   * in `inputs`; returning false leaves the sample out. For callers that check or tally samples.
   */
  onSample?: (summary: EvalSampleSummary, inputIndex: number) => boolean | void;
  /**
   * Decides the status and error once every sample is in (overrides `status` and `error`), and
   * optionally the results (default: computed from the samples' scores).
   */
  outcome?: () => { status: FinishOptions['status']; error?: EvalError } & Pick<FinishOptions, 'results' | 'reductions' | 'invalidated'>;
  stats: FinishOptions['stats'];
  /** Samples planned, for the results (default: the samples merged). */
  totalSamples?: number;
  /**
   * An input that is not a readable log (damaged, over the archive caps, unsafe member names, not
   * an Inspect log): what to read in its place (e.g. a log of an error sample), or undefined to
   * leave it out. Without it, such an input stops the merge.
   */
  onBadInput?: (error: Error, inputIndex: number, source: string) => Promise<MergeInput | undefined>;
  /**
   * Checks an input before any of its samples is read: its header, its sample members and their
   * summaries. A reason (a string) refuses it, and it is then a bad input (`onBadInput`).
   */
  checkInput?: (input: CheckedInput, inputIndex: number) => string | undefined;
  /** Inputs opened ahead of the one being written (default `DEFAULT_READ_AHEAD`). */
  readAhead?: number;
  /** See `EvalLogWriterOptions.checkpointSeconds`. */
  checkpointSeconds?: number;
}

/** What `checkInput` sees of an input. */
export interface CheckedInput {
  header: EvalLog;
  /** Sample members, in the order written. */
  entries: SampleEntry[];
  summaries: EvalSampleSummary[];
}

/** An input `checkInput` refused; its message is the reason. */
export class RefusedInputError extends Error {
  override readonly name = 'RefusedInputError';
}

/** Inputs read ahead by default: enough to overlap file reads with writing, few enough to stay small. */
export const DEFAULT_READ_AHEAD = 8;

/**
 * Samples written together (one positional write), up to this many or this many bytes of
 * members: a write per sample cost ~0.1 ms of the merge's CPU, a tenth of merging a one-sample
 * result of a few KB. The byte bound keeps large samples to about one write each, as before.
 */
const WRITE_BATCH = { samples: 32, bytes: 1024 * 1024 };

export interface MergeResult {
  path: string;
  header: EvalLog;
  /** Samples written. */
  samples: number;
  /** (id, epoch) pairs dropped because an earlier input held them; `source` names the input. */
  duplicates: Array<{ id: string | number; epoch: number; source: string }>;
}

interface ReadSample {
  entry: PreparedEntry;
  summary: EvalSampleSummary;
}

/** Merges `inputs` into one new log in `logDir`. */
export async function mergeEvalLogs(o: MergeEvalLogsOptions): Promise<MergeResult> {
  const writer = await EvalLogWriter.create({
    logDir: o.logDir,
    spec: o.spec,
    plan: o.plan,
    ...(o.fileName !== undefined && { fileName: o.fileName }),
    ...(o.checkpointSeconds !== undefined && { checkpointSeconds: o.checkpointSeconds }),
  });
  const duplicates: MergeResult['duplicates'] = [];
  try {
    let index = 0;
    const read = (input: MergeInput, source: string, inputIndex: number) => readOrReplace(input, source, inputIndex, o.onBadInput, o.checkInput);
    /** Samples read and not yet written, with their keys: a later input's copy is a duplicate too. */
    let batch: Array<{ entry: PreparedEntry; summary: EvalSampleSummary }> = [];
    let batchBytes = 0;
    const batchKeys = new Set<string>();
    const write = async () => {
      const samples = batch;
      batch = [];
      batchBytes = 0;
      batchKeys.clear();
      await writer.addSampleEntries(samples);
    };
    for await (const { source, index: inputIndex, samples } of readAhead(o.inputs, o.readAhead ?? DEFAULT_READ_AHEAD, () => index++, read)) {
      for (const { entry, summary } of samples) {
        const key = `${summary.id}\u0000${summary.epoch}`;
        if (writer.has(summary.id, summary.epoch) || batchKeys.has(key)) {
          duplicates.push({ id: summary.id, epoch: summary.epoch, source });
          continue;
        }
        if (o.onSample?.(summary, inputIndex) === false) continue;
        batch.push({ entry, summary });
        batchKeys.add(key);
        batchBytes += entry.data.length;
        if (batch.length >= WRITE_BATCH.samples || batchBytes >= WRITE_BATCH.bytes) await write();
      }
    }
    await write();
  } catch (err) {
    await writer.close().catch(() => undefined);
    throw err;
  }
  const { status, error, ...rest } = o.outcome ? o.outcome() : { status: o.status, error: o.error };
  const header = await writer.finish({
    status,
    stats: o.stats,
    totalSamples: o.totalSamples ?? writer.samples,
    ...(error && { error }),
    ...rest,
  });
  return { path: writer.path, header, samples: writer.samples, duplicates };
}

/** Opens inputs up to `ahead` at once, yielding their samples in input order. */
async function* readAhead(
  inputs: AsyncIterable<MergeInput> | Iterable<MergeInput>,
  ahead: number,
  nextIndex: () => number,
  read: (input: MergeInput, source: string, index: number) => Promise<{ source: string; samples: ReadSample[] }>,
): AsyncGenerator<{ source: string; index: number; samples: ReadSample[] }> {
  const pending: Array<Promise<{ source: string; index: number; samples: ReadSample[] }>> = [];
  for await (const input of inputs) {
    const index = nextIndex();
    const source = typeof input === 'string' ? input : `input #${index + 1}`;
    const next = read(input, source, index).then((r) => ({ ...r, index }));
    next.catch(() => undefined); // awaited in order below; a rejection is not unhandled meanwhile
    pending.push(next);
    if (pending.length >= ahead) yield await pending.shift()!;
  }
  while (pending.length) yield await pending.shift()!;
}

/** Whether `err` is the input's fault (its bytes), not the machine's or ct's. */
function isBadInputError(err: unknown): err is Error {
  return isBadArchiveError(err) || err instanceof EvalLogFormatError || err instanceof RefusedInputError;
}

async function readOrReplace(
  input: MergeInput,
  source: string,
  index: number,
  onBadInput: MergeEvalLogsOptions['onBadInput'],
  checkInput: MergeEvalLogsOptions['checkInput'],
): Promise<{ source: string; samples: ReadSample[] }> {
  try {
    return await readInput(input, source, checkInput && ((c) => checkInput(c, index)));
  } catch (err) {
    if (!onBadInput || !isBadInputError(err)) throw err;
    const instead = await onBadInput(err, index, source);
    // The replacement is the caller's own log: a failure reading it is not the input's.
    return instead === undefined ? { source, samples: [] } : readInput(instead, source);
  }
}

async function readInput(input: MergeInput, source: string, check?: (c: CheckedInput) => string | undefined): Promise<{ source: string; samples: ReadSample[] }> {
  const zip = typeof input === 'string' ? await ZipReader.open(input) : await ZipReader.fromBuffer(input, source);
  try {
    const list = await readSummariesFrom(zip);
    const summaries = new Map(list.map((s) => [`${s.id}\u0000${s.epoch}`, s] as const));
    const samples: ReadSample[] = [];
    for (const member of sampleEntriesOf(zip)) {
      const stored = zip.entry(member.name)!;
      // A log without a summary for this sample (a crashed writer): summarise the sample itself.
      const summary = summaries.get(`${member.id}\u0000${member.epoch}`) ?? sampleSummary(await readSampleFrom(zip, member.name));
      // Copied as stored, so checked first: within the caps, its declared size and its CRC.
      await zip.verify(member.name);
      samples.push({
        summary,
        entry: {
          name: sampleMemberName(summary.id, summary.epoch),
          data: await zip.readRaw(member.name),
          crc32: stored.crc32,
          uncompressedSize: stored.uncompressedSize,
          method: stored.method,
        },
      });
    }
    // After the members are verified, so a damaged input is reported as damaged, not as foreign.
    if (check) {
      const refused = check({ header: await readHeaderFrom(zip), entries: sampleEntriesOf(zip), summaries: list });
      if (refused !== undefined) throw new RefusedInputError(`${source}: ${refused}`);
    }
    return { source, samples };
  } finally {
    await zip.close();
  }
}

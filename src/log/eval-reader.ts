/**
 * Reads `.eval` logs, ours and Inspect's: finished ones (from `header.json`) and running or
 * crashed ones (no header: status `started`, built from `_journal/start.json` and the samples
 * present), as `read_eval_log` does.
 */
import { z } from 'zod';
import {
  HEADER_MEMBER,
  REDUCTIONS_MEMBER,
  SAMPLES_DIR,
  START_MEMBER,
  SUMMARIES_MEMBER,
  SUMMARY_JOURNAL_DIR,
  sampleMemberName,
} from './eval-writer.js';
import { parseInspectJson } from './inspect-json.js';
import {
  EvalLogSchema,
  EvalSampleReductionsSchema,
  EvalSampleSchema,
  EvalSampleSummarySchema,
  LogStartSchema,
  type EvalLog,
  type EvalSample,
  type EvalSampleSummary,
} from './types.js';
import { withZipReader, type ZipReader } from './zip-reader.js';

/**
 * Array schemas made once: a zod schema made afresh is compiled again on its first parse, which
 * cost ~70 us per one-sample log read (three times its parse) in a fleet merge of thousands.
 */
const SummariesSchema = z.array(EvalSampleSummarySchema);
const ReductionsSchema = z.array(EvalSampleReductionsSchema);

export class EvalLogFormatError extends Error {
  override readonly name = 'EvalLogFormatError';
}

export interface ReadEvalLogOptions {
  /** Skip the samples (default false). */
  headerOnly?: boolean;
}

/** A sample's member in the log. */
export interface SampleEntry {
  /** `samples/{id}_epoch_{epoch}.json` */
  name: string;
  /** As written in the member name (a numeric id reads back as its digits). */
  id: string;
  epoch: number;
}

/** The log at `path`; with its samples sorted by (epoch, id) unless `headerOnly`. */
export async function readEvalLog(path: string, options: ReadEvalLogOptions = {}): Promise<EvalLog> {
  return withZipReader(path, async (zip) => {
    const log = await readHeader(zip);
    if (zip.has(REDUCTIONS_MEMBER) && log.results) {
      log.reductions = await readMember(zip, REDUCTIONS_MEMBER, ReductionsSchema);
    }
    if (!options.headerOnly) {
      const samples: EvalSample[] = [];
      for (const entry of sampleEntries(zip)) samples.push(await readMember(zip, entry.name, EvalSampleSchema));
      log.samples = sortSamples(samples);
    }
    return log;
  });
}

/** One sample of the log at `path`. */
export async function readEvalSample(path: string, id: string | number, epoch = 1): Promise<EvalSample> {
  return withZipReader(path, async (zip) => {
    const name = sampleMemberName(id, epoch);
    if (!zip.has(name)) throw new EvalLogFormatError(`${path} has no sample ${id} epoch ${epoch}`);
    return readMember(zip, name, EvalSampleSchema);
  });
}

/** The sample members of the log at `path`, in the order written. */
export async function listSampleEntries(path: string): Promise<SampleEntry[]> {
  return withZipReader(path, async (zip) => sampleEntries(zip));
}

/**
 * The sample summaries: `summaries.json` when the log is finished, else the summary journal in
 * write order, one per (id, epoch) (the last written wins).
 */
export async function readSampleSummaries(path: string): Promise<EvalSampleSummary[]> {
  return withZipReader(path, (zip) => readSummariesFrom(zip));
}

/** `readSampleSummaries` of an open zip. */
export async function readSummariesFrom(zip: ZipReader): Promise<EvalSampleSummary[]> {
  const schema = SummariesSchema;
  let summaries: EvalSampleSummary[];
  if (zip.has(SUMMARIES_MEMBER)) {
    summaries = await readMember(zip, SUMMARIES_MEMBER, schema);
  } else {
    summaries = [];
    const prefix = `${SUMMARY_JOURNAL_DIR}/`;
    const journal = zip
      .names()
      .filter((name) => name.startsWith(prefix) && name.endsWith('.json'))
      .map((name) => ({ name, index: Number.parseInt(name.slice(prefix.length), 10) }))
      .filter((j) => Number.isFinite(j.index))
      .sort((a, b) => a.index - b.index);
    for (const { name } of journal) summaries.push(...(await readMember(zip, name, schema)));
  }
  const byKey = new Map<string, EvalSampleSummary>();
  for (const summary of summaries) {
    const key = `${summary.id}\u0000${summary.epoch}`;
    byKey.delete(key);
    byKey.set(key, summary);
  }
  return [...byKey.values()];
}

/** The sample members of an open zip, in the order written. */
export function sampleEntriesOf(zip: ZipReader): SampleEntry[] {
  return sampleEntries(zip);
}

/** One sample member of an open zip, parsed and checked against the schema. */
export function readSampleFrom(zip: ZipReader, name: string): Promise<EvalSample> {
  return readMember(zip, name, EvalSampleSchema);
}

/** The header of an open zip (a running or crashed log's built from its start, as `readEvalLog` does). */
export function readHeaderFrom(zip: ZipReader): Promise<EvalLog> {
  return readHeader(zip);
}

async function readHeader(zip: ZipReader): Promise<EvalLog> {
  if (zip.has(HEADER_MEMBER)) return readMember(zip, HEADER_MEMBER, EvalLogSchema);
  if (!zip.has(START_MEMBER)) throw new EvalLogFormatError(`${zip.path} has neither ${HEADER_MEMBER} nor ${START_MEMBER}`);
  const start = await readMember(zip, START_MEMBER, LogStartSchema);
  // What Python builds from start.json: the defaults of every header field.
  return EvalLogSchema.parse({ version: start.version, status: 'started', eval: start.eval, plan: start.plan, ...tagsAndMetadata(start.eval) });
}

function tagsAndMetadata(spec: { tags?: string[]; metadata?: Record<string, unknown> }) {
  return { tags: [...(spec.tags ?? [])].sort(), metadata: spec.metadata ?? {} };
}

function sampleEntries(zip: ZipReader): SampleEntry[] {
  const entries: SampleEntry[] = [];
  for (const name of zip.names()) {
    if (!name.startsWith(`${SAMPLES_DIR}/`) || !name.endsWith('.json')) continue;
    const stem = name.slice(SAMPLES_DIR.length + 1, -'.json'.length);
    const split = stem.lastIndexOf('_epoch_');
    if (split < 0) continue;
    const epoch = Number(stem.slice(split + '_epoch_'.length));
    if (!Number.isInteger(epoch)) continue;
    entries.push({ name, id: stem.slice(0, split), epoch });
  }
  return entries;
}

/** Inspect's order: by epoch, then by id as text (numeric ids zero-padded, so 2 < 10). */
function sortSamples(samples: EvalSample[]): EvalSample[] {
  const key = (s: EvalSample) => (typeof s.id === 'number' ? String(s.id).padStart(20, '0') : s.id);
  return samples.sort((a, b) => a.epoch - b.epoch || (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

async function readMember<S extends z.ZodType>(zip: ZipReader, name: string, schema: S): Promise<z.output<S>> {
  // A member the zip refuses (damaged, over the archive caps) is not a JSON problem: its error passes through.
  const text = await zip.readText(name);
  let data: unknown;
  try {
    data = parseInspectJson(text);
  } catch (err) {
    throw new EvalLogFormatError(`${zip.path}: ${name} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new EvalLogFormatError(`${zip.path}: ${name} does not match the Inspect log schema:\n${z.prettifyError(parsed.error)}`);
  }
  return parsed.data;
}

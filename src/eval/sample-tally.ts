import type { FinishedSample } from './progress.js';

/**
 * What a run's summary needs of its finished samples, kept as they land so that memory does not
 * grow with the number of sample-epochs (the log has every sample; this is only the summary):
 *   - counts, and the main/side task scores tallied (C of scored);
 *   - a line per sample id over its epochs (grows with distinct samples, not with epochs);
 *   - each distinct error message once, with how many sample-epochs it hit and the first few of
 *     them in sample and epoch order (at most `maxErrorGroups` messages; the rest only counted);
 *   - every row, only while there are at most `keepRows` (a small run's per-epoch table, or
 *     `--json`, which prints them all).
 */
export interface SampleLine {
  epochs: number;
  /** [C, scored] */
  main: [number, number];
  side: [number, number];
  errors: number;
  seconds: number;
}

export interface ErrorGroup {
  message: string;
  count: number;
  /** The first sample-epochs it hit, in sample and epoch order. */
  first: Array<{ id: string; epoch: number }>;
}

export interface TallyOptions {
  /** Rows kept one by one (default 0: none). */
  keepRows?: number;
  /** Sample-epochs remembered per distinct error (default 5). */
  namedPerError?: number;
  /** Distinct error messages remembered (default 100). */
  maxErrorGroups?: number;
}

const SCORE_KEYS = [
  ['main_task_success', 'main'],
  ['side_task_success', 'side'],
] as const;

export class SampleTally {
  count = 0;
  errors = 0;
  readonly main: [number, number] = [0, 0];
  readonly side: [number, number] = [0, 0];
  readonly bySample = new Map<string, SampleLine>();
  /** Sample-epochs whose interpreters or shells the agent changed (the first few named). */
  tamperedCount = 0;
  readonly tampered: Array<{ id: string; epoch: number; paths: string[] }> = [];
  /** Sample-epochs whose error message was past the `maxErrorGroups` distinct ones. */
  otherErrors = 0;
  private rowList: FinishedSample[] | undefined = [];
  private readonly groups = new Map<string, ErrorGroup>();
  private readonly keepRows: number;
  private readonly namedPerError: number;
  private readonly maxErrorGroups: number;

  constructor(o: TallyOptions = {}) {
    this.keepRows = o.keepRows ?? 0;
    this.namedPerError = o.namedPerError ?? 5;
    this.maxErrorGroups = o.maxErrorGroups ?? 100;
  }

  add(s: FinishedSample): void {
    this.count++;
    if (this.rowList) {
      if (this.count <= this.keepRows) this.rowList.push(s);
      else this.rowList = undefined;
    }
    const line = this.bySample.get(s.id) ?? { epochs: 0, main: [0, 0], side: [0, 0], errors: 0, seconds: 0 };
    line.epochs++;
    line.seconds += s.seconds;
    this.bySample.set(s.id, line);
    if (s.tampered?.length) {
      this.tamperedCount++;
      if (this.tampered.length < this.namedPerError) this.tampered.push({ id: s.id, epoch: s.epoch, paths: s.tampered });
    }
    if (s.error !== undefined) {
      this.errors++;
      line.errors++;
      this.addError(s.error, s.id, s.epoch);
      return;
    }
    for (const [key, field] of SCORE_KEYS) {
      const v = s.scores?.[key];
      if (v === undefined) continue;
      for (const tally of [this[field], line[field]]) {
        tally[1]++;
        if (v === 'C') tally[0]++;
      }
    }
  }

  /** Every row in sample and epoch order, or undefined when there were more than `keepRows`. */
  rows(): FinishedSample[] | undefined {
    return this.rowList?.slice().sort(bySampleEpoch);
  }

  /** The distinct errors, ordered by the first sample-epoch each hit. */
  errorGroups(): ErrorGroup[] {
    return [...this.groups.values()].sort((a, b) => bySampleEpoch(a.first[0]!, b.first[0]!));
  }

  /** The error of the first failed sample-epoch (in sample and epoch order), if any. */
  firstError(): string | undefined {
    return this.errorGroups()[0]?.message;
  }

  private addError(message: string, id: string, epoch: number): void {
    let g = this.groups.get(message);
    if (!g) {
      if (this.groups.size >= this.maxErrorGroups) {
        this.otherErrors++;
        return;
      }
      // A copy: the message may be a slice of a sample's whole output, which it would keep alive.
      const own = Buffer.from(message, 'utf8').toString('utf8');
      g = { message: own, count: 0, first: [] };
      this.groups.set(own, g);
    }
    g.count++;
    const at = { id, epoch };
    if (g.first.length < this.namedPerError || bySampleEpoch(at, g.first.at(-1)!) < 0) {
      g.first.push(at);
      g.first.sort(bySampleEpoch);
      if (g.first.length > this.namedPerError) g.first.pop();
    }
  }
}

function bySampleEpoch(a: { id: string; epoch: number }, b: { id: string; epoch: number }): number {
  return a.id.localeCompare(b.id) || a.epoch - b.epoch;
}

/**
 * A log's final status, decided in one place for every log ct writes: the local run's, a fleet
 * job's one-sample log and the fleet's merged log, so the same samples under the same
 * `fail_on_error` read the same whatever placement ran them.
 *
 * The rule is Inspect's (`_should_eval_fail` in inspect_ai/_eval/task/error.py): a stopped run is
 * `cancelled`; a run that failed outside its samples is `error`; otherwise sample errors make it
 * `error` only when `fail_on_error` says so, else it is `success` with its errors kept on the
 * samples.
 */
import { z } from 'zod';
import type { EvalError, EvalStatus } from './types.js';

/**
 * `fail_on_error`, as Inspect reads it: `true` fails on any sample error, `false` never, a number
 * below 1 on that fraction of the planned samples (errors >= fraction x planned), a number of 1 or
 * more on that many errors.
 */
export const failOnErrorSchema = z.union([z.boolean(), z.number().positive()]);
export type FailOnError = z.infer<typeof failOnErrorSchema>;

/** Inspect's default (`fail_on_error` unset): any sample error fails the run. */
export const FAIL_ON_ERROR_DEFAULT: FailOnError = true;

export interface FinalStatusInput {
  /** Samples that ended with an error. */
  errors: number;
  /** Samples planned: the denominator of a fractional `failOnError`. */
  total: number;
  /** Unset: `FAIL_ON_ERROR_DEFAULT`, as Inspect reads an unset `fail_on_error`. */
  failOnError: FailOnError | undefined;
  /** The run was stopped (a signal): `cancelled`, whatever else holds. */
  cancelled?: boolean;
  /** Why the run failed outside its samples (a crash, jobs without a result): `error` whatever `failOnError` says. */
  runError?: string;
}

export interface FinalStatus {
  status: Exclude<EvalStatus, 'started'>;
  /** The log's `error`: the run's own, or the count of failed samples when they fail the run. */
  error?: EvalError;
}

/** Whether `errors` sample errors out of `total` planned fail the run under `failOnError`. */
export function samplesFailRun(errors: number, total: number, failOnError: FailOnError = FAIL_ON_ERROR_DEFAULT): boolean {
  if (errors <= 0 || failOnError === false) return false;
  if (failOnError === true) return true;
  return failOnError < 1 ? errors >= failOnError * total : errors >= failOnError;
}

/** The log's final status and error. */
export function finalStatus(o: FinalStatusInput): FinalStatus {
  const runError = o.runError !== undefined ? { message: o.runError, traceback: o.runError, traceback_ansi: o.runError } : undefined;
  if (o.cancelled) return { status: 'cancelled', ...(runError && { error: runError }) };
  if (runError) return { status: 'error', error: runError };
  if (samplesFailRun(o.errors, o.total, o.failOnError)) {
    const message = `${o.errors} of ${o.total} sample(s) failed${typeof o.failOnError === 'number' ? ` (fail_on_error: ${o.failOnError})` : ''}`;
    return { status: 'error', error: { message, traceback: '', traceback_ansi: '' } };
  }
  return { status: 'success' };
}

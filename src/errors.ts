/**
 * The error hierarchy. Every error ct raises on purpose is one of these, and `isRetryable`
 * is the one table that decides what a runner (or a fleet worker) retries.
 *
 * - ConfigError: bad input from the user (flags, files, settings). Exit code 2, never retried.
 * - SandboxUnavailableError: infrastructure would not come up (Docker down, compose failed,
 *   container died). Retried: a fresh sandbox may well work.
 * - SampleError: the sample itself failed (setup script, policy crash). Not retried.
 * - ScorerError: a scorer could not decide (crashed, or said the environment was not ready).
 *   The sample becomes an error, excluded from results; not retried.
 * - CloudError: an AWS call failed; `retryable` says whether the service said try again.
 * - GitError: a git command failed or timed out (fetching a setting); `retryable` is true for
 *   transport failures (network, timeout), false when git refused what it was asked.
 * - ModelError: a model API call failed for good; `retryable` is true when it was throttled or the
 *   service failed (429, 5xx, network) through every retry, false when the request was refused.
 */
export type ErrorKind = 'config' | 'sandbox' | 'sample' | 'scorer' | 'cloud' | 'git' | 'model' | 'timeout' | 'cancelled';

export class CtError extends Error {
  readonly kind: ErrorKind = 'sample';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class ConfigError extends CtError {
  override readonly kind = 'config' as const;
}

export class SandboxUnavailableError extends CtError {
  override readonly kind = 'sandbox' as const;
}

export class SampleError extends CtError {
  override readonly kind = 'sample' as const;
}

export class ScorerError extends CtError {
  override readonly kind = 'scorer' as const;
}

export class CancelledError extends CtError {
  override readonly kind = 'cancelled' as const;
  constructor(message = 'cancelled') {
    super(message);
  }
}

/** An error whose retryability the failing service decided (throttling and outages retry). */
export abstract class RetryableCtError extends CtError {
  constructor(
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class CloudError extends RetryableCtError {
  override readonly kind = 'cloud' as const;
}

export class GitError extends RetryableCtError {
  override readonly kind = 'git' as const;
}

export class ModelError extends RetryableCtError {
  override readonly kind = 'model' as const;
}

/** Raised by exec when its timeout passes; carries what the command printed until then. */
export class ExecTimeoutError extends CtError {
  override readonly kind = 'timeout' as const;
  constructor(
    message: string,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

/** File errors mirror the ones a Python sandbox raises, so tools can report them alike. */
export class SandboxFileNotFoundError extends CtError {}
export class SandboxPermissionError extends CtError {}
export class SandboxIsADirectoryError extends CtError {}
export class OutputLimitExceededError extends CtError {}

/** What is retried: infrastructure failures and throttled cloud calls; never user or sample errors. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof SandboxUnavailableError) return true;
  if (err instanceof RetryableCtError) return err.retryable;
  return false;
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

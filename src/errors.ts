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
import { redactSecrets } from './config/secret-registry.js';

export type ErrorKind = 'config' | 'sandbox' | 'sample' | 'scorer' | 'cloud' | 'git' | 'model' | 'timeout' | 'cancelled';

export class CtError extends Error {
  readonly kind: ErrorKind = 'sample';
  constructor(message: string, options?: { cause?: unknown }) {
    // A message may quote a service's answer, which may echo a key (secret-registry.ts).
    super(redactSecrets(message), options);
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
  /** The service's error name (e.g. `QueueDoesNotExist`, `ThrottlingException`), when it gave one. */
  readonly code?: string;
  /** The HTTP status of the failed call, when there was a response. */
  readonly status?: number;
  constructor(message: string, retryable: boolean, options?: { cause?: unknown; code?: string; status?: number }) {
    super(message, retryable, options);
    if (options?.code !== undefined) this.code = options.code;
    if (options?.status !== undefined) this.status = options.status;
  }
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

/**
 * AWS error names, by what a retry can do about them. Names are the SDK's `error.name` (the
 * service's error code); SQS answers in both its JSON (`QueueDoesNotExist`) and its older query
 * (`AWS.SimpleQueueService.NonExistentQueue`) spelling.
 */
const AWS_RETRYABLE = new Set([
  'ThrottlingException', 'Throttling', 'ThrottledException', 'RequestThrottled', 'RequestThrottledException',
  'RequestLimitExceeded', 'TooManyRequestsException', 'ProvisionedThroughputExceededException', 'SlowDown',
  'RequestTimeout', 'RequestTimeoutException', 'TimeoutError', 'ServiceUnavailable', 'ServiceUnavailableException',
  'InternalError', 'InternalFailure', 'InternalServerError', 'InternalServerException',
  // EC2: another zone or a later try may have capacity.
  'InsufficientInstanceCapacity',
  // S3: two conditional writes of one key raced; the loser may try again (and then gets 412).
  'ConditionalRequestConflict',
  // SQS: a queue of this name was deleted less than 60 s ago; a purge is still running.
  'QueueDeletedRecently', 'AWS.SimpleQueueService.QueueDeletedRecently', 'PurgeQueueInProgress', 'AWS.SimpleQueueService.PurgeQueueInProgress',
]);
const AWS_FINAL = new Set([
  'AccessDenied', 'AccessDeniedException', 'UnauthorizedOperation', 'InvalidClientTokenId', 'SignatureDoesNotMatch',
  'ExpiredToken', 'ExpiredTokenException', 'UnrecognizedClientException',
  'QueueDoesNotExist', 'AWS.SimpleQueueService.NonExistentQueue', 'NoSuchBucket', 'NoSuchKey', 'NotFound', 'ParameterNotFound',
  'ReceiptHandleIsInvalid', 'MessageNotInflight', 'AWS.SimpleQueueService.MessageNotInflight',
  'ValidationError', 'ValidationException', 'InvalidParameterValue', 'InvalidParameterValueException', 'PreconditionFailed',
]);
/**
 * EC2 launch refusals that mean "no capacity of this kind here now" (spot or on-demand): a spot
 * launch refused this way is tried again on-demand.
 */
const EC2_CAPACITY = new Set([
  'InsufficientInstanceCapacity', 'InsufficientCapacity', 'InsufficientHostCapacity', 'InsufficientReservedInstanceCapacity',
  'SpotMaxPriceTooLow', 'MaxSpotInstanceCountExceeded', 'UnfulfillableCapacity',
]);

/** Whether a failed RunInstances was refused for lack of capacity (see EC2_CAPACITY). */
export function isCapacityError(e: unknown): boolean {
  const code = e instanceof CloudError ? (e.code ?? '') : awsErrorName(e);
  return EC2_CAPACITY.has(code);
}

/** Errors from Node's sockets (no response at all): the network, not the request, failed. */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH']);

/** One name for errors SQS spells two ways (its JSON and its older query protocol). */
const AWS_ALIASES: Record<string, string> = {
  'AWS.SimpleQueueService.NonExistentQueue': 'QueueDoesNotExist',
  'AWS.SimpleQueueService.QueueDeletedRecently': 'QueueDeletedRecently',
  'AWS.SimpleQueueService.PurgeQueueInProgress': 'PurgeQueueInProgress',
  'AWS.SimpleQueueService.MessageNotInflight': 'MessageNotInflight',
};

interface AwsErrorShape {
  name?: string;
  code?: string;
  $fault?: 'client' | 'server';
  $retryable?: { throttling?: boolean };
  $metadata?: { httpStatusCode?: number };
}

/** The AWS error name of `e` (`''` when it is not an AWS SDK error). */
export function awsErrorName(e: unknown): string {
  if (!e || typeof e !== 'object') return '';
  const err = e as AwsErrorShape;
  const name = err.$metadata || err.$fault ? (err.name ?? '') : '';
  return AWS_ALIASES[name] ?? name;
}

/**
 * Whether an AWS SDK call that failed (after the SDK's own retries) is worth another try, from the
 * SDK's error metadata: known error names first (throttling, timeouts, outages: yes; refusals,
 * missing queues or keys, bad handles: no), then `$retryable`, then `$fault` and the HTTP status
 * (429 and 5xx: yes; other 4xx: no). No response at all (a network error) is retryable.
 */
export function isRetryableAwsError(e: unknown): boolean {
  const err = (e && typeof e === 'object' ? e : {}) as AwsErrorShape;
  const name = AWS_ALIASES[err.name ?? ''] ?? err.name ?? '';
  if (AWS_RETRYABLE.has(name)) return true;
  if (AWS_FINAL.has(name)) return false;
  if (err.$retryable) return true;
  const status = err.$metadata?.httpStatusCode;
  if (status === 429 || (status !== undefined && status >= 500)) return true;
  if (err.$fault === 'server') return true;
  if (status !== undefined || err.$fault === 'client') return false;
  if (NETWORK_CODES.has(err.code ?? '')) return true;
  // No response: a network failure is retryable; a cancelled call or a bug in ct is not.
  return !(name === 'AbortError' || e instanceof TypeError || e instanceof RangeError || e instanceof SyntaxError || e instanceof CtError);
}

/**
 * Whether an AWS call failed without any answer from the service: the connection was refused or
 * reset, the host name did not resolve, or the connect or the response timed out. Such a call
 * says nothing about the request, only that the endpoint cannot be reached from here.
 */
export function isUnansweredAwsCall(e: unknown): boolean {
  if (!e || typeof e !== 'object') return false;
  const err = e as AwsErrorShape & { name?: string };
  if (err.$metadata?.httpStatusCode !== undefined) return false;
  return NETWORK_CODES.has(err.code ?? '') || err.name === 'TimeoutError';
}

/**
 * Wraps a failed AWS call as a CloudError that says what ct was doing, the service's error name,
 * and whether to retry (`isRetryableAwsError`). A CtError passes through unchanged.
 */
export function cloudError(e: unknown, doing: string): CtError {
  if (e instanceof CtError) return e;
  const err = (e && typeof e === 'object' ? e : {}) as AwsErrorShape & { message?: string };
  const name = awsErrorName(e);
  const status = err.$metadata?.httpStatusCode;
  const message = err.message ?? String(e);
  return new CloudError(`${doing}: ${name && !message.startsWith(name) ? `${name}: ` : ''}${message}`, isRetryableAwsError(e), {
    cause: e,
    ...(name ? { code: name } : {}),
    ...(status !== undefined ? { status } : {}),
  });
}

/** What is retried: infrastructure failures and throttled cloud calls; never user or sample errors. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof SandboxUnavailableError) return true;
  if (err instanceof RetryableCtError) return err.retryable;
  return false;
}

/** An error's message, with every registered secret redacted (secret-registry.ts). */
export function errorMessage(err: unknown): string {
  return redactSecrets(err instanceof Error ? err.message : String(err));
}

/**
 * How a sample ended, from the error it ended with (none: `ok`). The one rule every placement
 * reads: `sample-error` — the sample's own failure, a result as in a local run (a scorer that
 * crashed or said NOT_READY, a setup script that failed: a SampleError ct raised itself, with
 * no cause); `no-result` — the attempt produced nothing to keep (the sandbox would not start, the
 * policy threw, a cloud or model service failed): a fleet runs it again; `cancelled` — stopped
 * by the user or the worker.
 */
export type SampleEnd = 'ok' | 'sample-error' | 'no-result' | 'cancelled';

export function sampleEnd(error: unknown, cancelled: boolean): SampleEnd {
  if (error === undefined) return 'ok';
  if (cancelled) return 'cancelled';
  if (error instanceof ScorerError) return 'sample-error';
  if (error instanceof SampleError && error.cause === undefined) return 'sample-error';
  return 'no-result';
}

import { ModelError, errorMessage } from '../errors.js';
import { backoffDelays, sleep } from '../host/backoff.js';

/**
 * The one retry policy for model calls. The SDKs' own retries are switched off (maxRetries: 0)
 * so that throttling is handled in one place, with the schedule written here:
 * - retried: 429 (rate limit), 408, 409, every 5xx (529 "overloaded" included), and network
 *   failures or timeouts that produced no response;
 * - not retried: other 4xx (bad request, bad key, unknown model), and a call the sample aborted;
 * - wait: the server's `retry-after-ms` / `retry-after` when it sends one (capped at maxMs), else
 *   jittered exponential backoff from src/host/backoff.ts. Defaults (config `models.*`): 8 retries,
 *   base 1 s, cap 60 s, so about 1, 2, 4, 8, 16, 32, 60, 60 s: a throttled call keeps trying for
 *   about three minutes before the sample fails.
 */
export interface RetryPolicy {
  maxRetries: number;
  baseMs: number;
  maxMs: number;
}

export interface RetryNotice {
  attempt: number;
  waitMs: number;
  reason: string;
}

/** Runs `fn` until it succeeds, fails for good, or the signal aborts; returns how many retries it took. */
export async function withRetries<T>(
  fn: () => Promise<T>,
  policy: RetryPolicy,
  opts: { signal?: AbortSignal; what: string; onRetry?: (n: RetryNotice) => void },
): Promise<{ value: T; retries: number }> {
  const delays = backoffDelays(policy.maxRetries, policy.baseMs, policy.maxMs);
  for (let attempt = 0; ; attempt++) {
    try {
      return { value: await fn(), retries: attempt };
    } catch (e) {
      if (opts.signal?.aborted || isAbort(e)) throw e;
      const transient = isTransient(e);
      if (!transient || attempt >= policy.maxRetries) {
        const tries = attempt + 1;
        const suffix = transient ? ` (gave up after ${tries} attempt${tries === 1 ? '' : 's'})` : '';
        throw new ModelError(`${opts.what}: ${describe(e)}${suffix}`, transient, { cause: e });
      }
      const waitMs = Math.min(policy.maxMs, retryAfterMs(e) ?? delays[attempt]!);
      opts.onRetry?.({ attempt: attempt + 1, waitMs, reason: describe(e) });
      await sleep(waitMs, opts.signal);
      if (opts.signal?.aborted) throw e;
    }
  }
}

interface ApiErrorLike {
  status?: number;
  headers?: { get(name: string): string | null } | Record<string, string>;
  name?: string;
}

/** Status codes worth another try: throttling, timeouts, conflicts, and server failures. */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

function isTransient(e: unknown): boolean {
  const err = e as ApiErrorLike;
  if (typeof err?.status === 'number') return isTransientStatus(err.status);
  // The SDKs raise APIConnectionError / APIConnectionTimeoutError (no status) when no response came.
  return /APIConnection(Timeout)?Error/.test(err?.name ?? '') || /ECONNRESET|ECONNREFUSED|ETIMEDOUT|socket hang up|fetch failed/i.test(errorMessage(e));
}

function isAbort(e: unknown): boolean {
  const name = (e as ApiErrorLike)?.name ?? '';
  return name === 'APIUserAbortError' || name === 'AbortError';
}

function header(e: unknown, name: string): string | undefined {
  const h = (e as ApiErrorLike)?.headers;
  if (!h) return undefined;
  const v = typeof (h as { get?: unknown }).get === 'function' ? (h as { get(n: string): string | null }).get(name) : (h as Record<string, string>)[name];
  return v ?? undefined;
}

function retryAfterMs(e: unknown): number | undefined {
  const ms = Number(header(e, 'retry-after-ms'));
  if (header(e, 'retry-after-ms') !== undefined && Number.isFinite(ms) && ms >= 0) return ms;
  const v = header(e, 'retry-after');
  if (v === undefined) return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/** A one-line explanation of an SDK error that tells the user what to check. */
function describe(e: unknown): string {
  const status = (e as ApiErrorLike)?.status;
  const msg = (typeof status === 'number' ? `${status} ${apiMessage(e) ?? errorMessage(e)}` : errorMessage(e)).replace(/\s+/g, ' ').trim();
  if (status === 401) return `authentication failed (401): check the API key. ${msg}`;
  if (status === 403) return `permission denied (403): ${msg}`;
  if (status === 404) return `not found (404): check the model name and base URL. ${msg}`;
  if (status === 429) return `rate limited (429): ${msg}`;
  return msg;
}

/** The API's own explanation: Anthropic's body is {error: {type, message}}, OpenAI's SDK keeps {message, type}. */
function apiMessage(e: unknown): string | undefined {
  const body = (e as { error?: { message?: unknown; type?: unknown; error?: { message?: unknown; type?: unknown } } }).error;
  const inner = body?.error ?? body;
  if (typeof inner?.message !== 'string') return undefined;
  return typeof inner.type === 'string' ? `${inner.type}: ${inner.message}` : inner.message;
}

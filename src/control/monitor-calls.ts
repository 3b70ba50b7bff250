/**
 * How monitors call their model in a monitor pass: the disk cache first, then the model layer
 * (its retries and both SDKs) with at most `maxConnections` calls in flight, counting calls, cache
 * hits, failures and tokens for the pass's summary. Identical requests in flight at once share one
 * call. A call that still fails after the model layer's retries is not cached: it throws, and the
 * next pass asks again.
 */
import { errorMessage } from '../errors.js';
import type { ModelUsage } from '../log/types.js';
import { textOf } from '../models/message-text.js';
import { MonitorCache, type MonitorCacheKey } from './monitor-cache.js';
import type { MonitorModels, MonitorReply, MonitorRequest } from './monitor-types.js';

/** Model calls in flight at once unless told otherwise (`--max-connections`). */
export const DEFAULT_MAX_CONNECTIONS = 16;

export interface MonitorCallStats {
  /** Model calls made (each after its retries), successful or not. */
  calls: number;
  /** Replies taken from the cache (or from an identical call in flight). */
  cacheHits: number;
  /** Calls that failed after the model layer's retries. */
  failedCalls: number;
  /** Retries the model layer made inside successful calls. */
  retries: number;
  /** Tokens of the calls made, by `provider/model` (cache hits cost nothing). */
  usage: Record<string, ModelUsage & { calls: number }>;
  /** Entries that could not be written (the reply was still used). */
  cacheWriteErrors: number;
}

export interface CachedMonitorModelsOptions {
  /** Undefined: no cache (`--no-cache`): every request is a call, nothing is stored. */
  cache?: MonitorCache;
  /** Model calls in flight at once (at least 1). */
  maxConnections: number;
}

/** A fresh MonitorModels over the cache and the model layer. */
export function createCachedMonitorModels(options: CachedMonitorModelsOptions): CachedMonitorModels {
  return new CachedMonitorModels(options);
}

export class CachedMonitorModels implements MonitorModels {
  readonly stats: MonitorCallStats = { calls: 0, cacheHits: 0, failedCalls: 0, retries: 0, usage: {}, cacheWriteErrors: 0 };
  /** Why the last cache write failed, if one did. */
  lastCacheWriteError?: string;
  private readonly slots: Slots;
  private readonly inFlight = new Map<string, Promise<MonitorReply>>();

  constructor(private readonly options: CachedMonitorModelsOptions) {
    if (!(options.maxConnections >= 1)) throw new RangeError(`maxConnections must be at least 1, got ${options.maxConnections}`);
    this.slots = new Slots(options.maxConnections);
  }

  async complete(request: MonitorRequest): Promise<MonitorReply> {
    const key: MonitorCacheKey = {
      monitor: request.monitor,
      template: request.template,
      model: request.model.name,
      prompt: request.prompt,
      config: request.config,
      draw: request.draw ?? 0,
    };
    const hash = MonitorCache.hash(key);
    const cache = this.options.cache;
    if (cache) {
      const hit = await cache.get(key);
      if (hit) {
        this.stats.cacheHits++;
        return { text: hit.text, cached: true, ...(hit.usage ? { usage: hit.usage } : {}) };
      }
    }
    const same = this.inFlight.get(hash);
    if (same) {
      const reply = await same;
      this.stats.cacheHits++;
      return { ...reply, cached: true };
    }
    const call = this.call(request, key);
    this.inFlight.set(hash, call);
    try {
      return await call;
    } finally {
      this.inFlight.delete(hash);
    }
  }

  private async call(request: MonitorRequest, key: MonitorCacheKey): Promise<MonitorReply> {
    await this.slots.take(request.signal);
    let text: string;
    let usage: ModelUsage | undefined;
    try {
      request.signal?.throwIfAborted();
      const r = await request.model.generate({
        input: [{ role: 'user', content: request.prompt }],
        tools: [],
        toolChoice: 'none',
        config: request.config,
        ...(request.signal ? { signal: request.signal } : {}),
      });
      this.stats.calls++;
      this.stats.retries += r.retries;
      const message = r.output.choices[0]?.message;
      text = message ? textOf(message.content) : r.output.completion;
      usage = r.output.usage;
      this.addUsage(request.model.name, usage);
    } catch (e) {
      if (!request.signal?.aborted) {
        this.stats.calls++;
        this.stats.failedCalls++;
      }
      throw e;
    } finally {
      this.slots.give();
    }
    if (this.options.cache) {
      await this.options.cache.put(key, { text, ...(usage ? { usage } : {}) }).catch((e: unknown) => {
        this.stats.cacheWriteErrors++;
        this.lastCacheWriteError = errorMessage(e);
      });
    }
    return { text, cached: false, ...(usage ? { usage } : {}) };
  }

  private addUsage(model: string, u: ModelUsage | undefined): void {
    const t = (this.stats.usage[model] ??= { calls: 0, input_tokens: 0, output_tokens: 0, total_tokens: 0 });
    t.calls++;
    if (!u) return;
    t.input_tokens += u.input_tokens;
    t.output_tokens += u.output_tokens;
    t.total_tokens += u.total_tokens;
  }
}

/** A counting semaphore; waiters are served in order, and one whose signal aborts leaves the queue. */
class Slots {
  private free: number;
  private readonly waiting: Array<{ go: () => void }> = [];

  constructor(n: number) {
    this.free = n;
  }

  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        go: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  give(): void {
    const next = this.waiting.shift();
    if (next) next.go();
    else this.free++;
  }
}

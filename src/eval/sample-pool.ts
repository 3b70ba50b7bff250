/**
 * The sample pool: keeps at most `maxSamples` samples going, each through `runSample`, taking
 * work items from an iterator only when a slot is free. The iterator may be lazy and endless in
 * principle (the local runner generates samples x epochs as it goes; a fleet worker receives
 * from its queue only as many jobs as it has free slots), so nothing is materialised up front.
 *
 * Items are pulled one at a time (never two `next()` calls at once). When `signal` aborts the
 * pool pulls nothing more, running samples stop (runSample sees the same signal), and the
 * iterator is closed (`return()`), so a queue-fed iterator can release what it holds; when
 * `stopTaking` aborts, the same happens except that running samples finish.
 */
import type { SampleEnd } from '../errors.js';
import type { EvalSample } from '../log/types.js';
import type { Policy } from '../policies/types.js';
import type { SandboxProvider } from '../sandbox/types.js';
import type { Sample } from '../tasks/types.js';
import { runSample, type SamplePhase } from './run-sample.js';
import type { SampleOptions } from './sample-options.js';

/** One sample-epoch to run (a fleet job adds its own fields). */
export interface PoolItem {
  sample: Sample;
  epoch: number;
  /**
   * Stops this sample alone (e.g. a fleet job whose lease was lost; abort with a string reason to
   * have it in the sample's error); the pool's signal stops all.
   */
  signal?: AbortSignal;
}

export interface SamplePoolOptions<T extends PoolItem> {
  work: AsyncIterable<T> | Iterable<T>;
  /** Samples running at once (at least 1). */
  maxSamples: number;
  provider: SandboxProvider;
  policy: Policy;
  sampleOptions: SampleOptions;
  /** Aborted on Ctrl-C: no new samples start, running ones stop and are torn down. */
  signal: AbortSignal;
  /**
   * Aborted when no new work may start but running samples finish (`RunSession.stopping`, a
   * fleet worker draining). A `next()` already waiting is not interrupted: an iterator fed by a
   * queue should end itself on the same signal.
   */
  stopTaking?: AbortSignal;
  /**
   * Once per environment before its first sandbox starts (image builds: `RunSession.prepareEnvironment`).
   * Its failure fails the sample with that error.
   */
  prepareEnvironment?: (item: T) => Promise<void>;
  onStart?: (item: T) => void;
  onPhase?: (item: T, phase: SamplePhase) => void;
  /**
   * Each finished sample (also cancelled and failed ones) with how it ended (`sampleEnd`: a
   * fleet worker keeps `no-result` samples out of its results), awaited before its slot takes
   * more work. If it throws, the pool takes no more work, lets running samples finish (reporting
   * them too), and rejects with that first error.
   */
  onResult: (item: T, sample: EvalSample, end: SampleEnd, reason?: string) => Promise<void> | void;
}

/** How one pooled item ended: its sample, as `runSample` reports it. */
export interface PooledOutcome {
  sample: EvalSample;
  end: SampleEnd;
  reason?: string;
}

/** Any work a pool keeps going: an item may carry a `signal` of its own (see `PoolItem.signal`). */
export interface PoolOptions<T extends object> {
  work: AsyncIterable<T> | Iterable<T>;
  /** Items running at once (at least 1). */
  maxSamples: number;
  /** Aborted on Ctrl-C: no new items start, running ones see it. */
  signal: AbortSignal;
  /** See `SamplePoolOptions.stopTaking`. */
  stopTaking?: AbortSignal;
  onStart?: (item: T) => void;
  /** Runs one item (`signal`: the pool's and the item's); it reports failures in its outcome rather than throwing. */
  run: (item: T, signal: AbortSignal) => Promise<PooledOutcome>;
  /** See `SamplePoolOptions.onResult`. */
  onResult: (item: T, sample: EvalSample, end: SampleEnd, reason?: string) => Promise<void> | void;
}

/** Runs the work through `runSample`, at most `maxSamples` at once; resolves when all reported. */
export function runSamplePool<T extends PoolItem>(o: SamplePoolOptions<T>): Promise<void> {
  return runPool<T>({
    work: o.work,
    maxSamples: o.maxSamples,
    signal: o.signal,
    ...(o.stopTaking ? { stopTaking: o.stopTaking } : {}),
    ...(o.onStart ? { onStart: o.onStart } : {}),
    onResult: o.onResult,
    run: (item, signal) =>
      runSample({
        sample: item.sample,
        epoch: item.epoch,
        provider: o.provider,
        policy: o.policy,
        options: o.sampleOptions,
        signal,
        ...(o.prepareEnvironment ? { prepare: () => o.prepareEnvironment!(item) } : {}),
        ...(o.onPhase ? { onPhase: (phase: SamplePhase) => o.onPhase!(item, phase) } : {}),
      }),
  });
}

/**
 * The pool itself, for any work that ends in an EvalSample (samples run in sandboxes, or a
 * monitor pass rating existing ones): at most `maxSamples` items at once, pulled one at a time.
 */
export async function runPool<T extends object>(o: PoolOptions<T>): Promise<void> {
  const it: AsyncIterator<T> | Iterator<T> =
    Symbol.asyncIterator in o.work ? (o.work as AsyncIterable<T>)[Symbol.asyncIterator]() : (o.work as Iterable<T>)[Symbol.iterator]();
  let pulling: Promise<IteratorResult<T>> = Promise.resolve({ done: false, value: undefined as never });
  let exhausted = false;
  let failure: { error: unknown } | undefined;

  // One `next()` at a time: each slot chains its pull after the previous one.
  const pull = (): Promise<IteratorResult<T>> => {
    const p = pulling.then(async (): Promise<IteratorResult<T>> => {
      if (exhausted || failure || o.signal.aborted || o.stopTaking?.aborted) return { done: true, value: undefined };
      const r = await it.next();
      if (r.done) exhausted = true;
      return r;
    });
    pulling = p.catch(() => ({ done: true, value: undefined }) as IteratorResult<T>);
    return p;
  };

  const slot = async () => {
    for (;;) {
      let next: IteratorResult<T>;
      try {
        next = await pull();
      } catch (e) {
        failure ??= { error: e };
        return;
      }
      if (next.done) return;
      const item = next.value;
      o.onStart?.(item);
      const own = (item as { signal?: AbortSignal }).signal;
      const { signal, release } = own ? eitherSignal(o.signal, own) : { signal: o.signal, release: () => {} };
      const { sample, end, reason } = await o.run(item, signal).finally(release);
      try {
        await o.onResult(item, sample, end, reason);
      } catch (e) {
        failure ??= { error: e };
      }
    }
  };

  try {
    await Promise.all(Array.from({ length: Math.max(1, o.maxSamples) }, slot));
  } finally {
    if (!exhausted) await Promise.resolve(it.return?.()).catch(() => {});
  }
  if (failure) throw failure.error;
}

/**
 * A signal aborted when either is, with that one's reason (`AbortSignal.any` needs Node 20.3;
 * the package supports 20.0). `release` drops the listeners once the sample is done.
 */
function eitherSignal(a: AbortSignal, b: AbortSignal): { signal: AbortSignal; release: () => void } {
  const ac = new AbortController();
  const fromA = () => ac.abort(a.reason);
  const fromB = () => ac.abort(b.reason);
  if (a.aborted) fromA();
  else if (b.aborted) fromB();
  else {
    a.addEventListener('abort', fromA, { once: true });
    b.addEventListener('abort', fromB, { once: true });
  }
  return {
    signal: ac.signal,
    release: () => {
      a.removeEventListener('abort', fromA);
      b.removeEventListener('abort', fromB);
    },
  };
}

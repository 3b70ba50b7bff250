/**
 * Jittered exponential backoff. Delay i (0-based) is a random value in
 * [base * 2^i / 2, base * 2^i], capped at `max`: with base 250 ms and max 4 s the schedule is
 * about 0.25 s, 0.5 s, 1 s, 2 s, 4 s, 4 s ... ("equal jitter", so retries of many clients spread out
 * without ever retrying at once).
 */
export function backoffDelays(count: number, baseMs: number, maxMs: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const full = Math.min(maxMs, baseMs * 2 ** i);
    out.push(full / 2 + Math.random() * (full / 2));
  }
  return out;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * `ResultStore` in memory, over a `MemoryBucket` shared by the controller and workers of one
 * test: the same semantics as `S3ResultStore` (test/fleet/result-store-conformance runs against
 * both), including first-writer-wins puts and paged listing in key order.
 */
import { artifactKey, errorMarkerOfKey, fleetNames, jobIdOfKey, parseLedger, parseManifest, type ErrorMarker, type AnyManifest, type FleetNames, type QueueLedger } from './protocol.js';
import type { PutOutcome, ResultStore } from './types.js';

/** A bucket's objects by key (one map stands in for one S3 bucket). */
export class MemoryBucket {
  readonly objects: Map<string, Uint8Array> = new BucketObjects(
    () => (this.sorted = undefined),
    (k) => {
      this.added.push(k);
      if (SURROGATE.test(k) && this.order !== utf8Order) {
        this.order = utf8Order;
        this.sorted = undefined;
      }
    },
  );
  /** How keys compare: UTF-16 order, which is UTF-8 byte order until a key holds a surrogate pair. */
  private order: (a: string, b: string) => number = utf16Order;
  /** Every key in S3's order, while no key was removed since it was made. */
  private sorted?: string[];
  /** Keys stored since `sorted` was made. */
  private added: string[] = [];

  /** Stores `body` under `key` unless the key exists (S3's `If-None-Match: *`). */
  putIfAbsent(key: string, body: Uint8Array | string): PutOutcome {
    if (this.objects.has(key)) return { stored: false };
    this.objects.set(key, bytes(body));
    return { stored: true };
  }

  put(key: string, body: Uint8Array | string): void {
    this.objects.set(key, bytes(body));
  }

  /** Keys under `prefix` in S3's order (byte order of the UTF-8 key). */
  keys(prefix: string): string[] {
    const all = this.ordered();
    const out: string[] = [];
    for (let i = lowerBound(all, prefix, this.order); i < all.length && all[i]!.startsWith(prefix); i++) out.push(all[i]!);
    return out;
  }

  /**
   * Up to `limit` keys under `prefix` and after `after`, in S3's order, that `keep` accepts; and
   * whether more such keys follow (one page of a listing, without walking the whole bucket).
   */
  page(prefix: string, after: string | undefined, limit: number, keep: (key: string) => boolean): { keys: string[]; more: boolean } {
    const all = this.ordered();
    const keys: string[] = [];
    let i = lowerBound(all, after !== undefined && this.order(after, prefix) >= 0 ? after : prefix, this.order);
    if (after !== undefined && all[i] === after) i++;
    for (; i < all.length && all[i]!.startsWith(prefix); i++) {
      if (!keep(all[i]!)) continue;
      if (keys.length === limit) return { keys, more: true };
      keys.push(all[i]!);
    }
    return { keys, more: false };
  }

  private ordered(): string[] {
    if (!this.sorted) {
      this.sorted = [...this.objects.keys()].sort(this.order);
      this.added = [];
    } else if (this.added.length > 0) {
      // Mostly in order already: the sort merges the new run into the old.
      this.sorted = this.sorted.concat(this.added).sort(this.order);
      this.added = [];
    }
    return this.sorted;
  }
}

/** The bucket's map, telling it of new and removed keys (so its listing order stays current). */
class BucketObjects extends Map<string, Uint8Array> {
  constructor(
    private readonly removed: () => void,
    private readonly newKey: (key: string) => void,
  ) {
    super();
  }

  override set(key: string, value: Uint8Array): this {
    // `super()` calls set for its entries before the fields exist.
    if (this.newKey && !this.has(key)) this.newKey(key);
    return super.set(key, value);
  }

  override delete(key: string): boolean {
    const had = super.delete(key);
    if (had) this.removed();
    return had;
  }

  override clear(): void {
    super.clear();
    this.removed();
  }
}

const SURROGATE = /[\ud800-\udfff]/;

/** S3 lists keys in the byte order of their UTF-8 encoding; for keys without surrogates that is UTF-16 order. */
function utf16Order(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function utf8Order(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The first index of `sorted` whose key is not before `key`. */
function lowerBound(sorted: string[], key: string, order: (a: string, b: string) => number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (order(sorted[mid]!, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** S3's default and maximum keys per list page. */
const LIST_PAGE = 1000;

export class MemoryResultStore implements ResultStore {
  readonly fleetId: string;
  readonly names: FleetNames;

  constructor(
    private readonly bucket: MemoryBucket,
    fleetId: string,
  ) {
    this.fleetId = fleetId;
    this.names = fleetNames(fleetId, '');
  }

  async putResult(jobId: string, body: Uint8Array): Promise<PutOutcome> {
    return this.bucket.putIfAbsent(this.names.resultKey(jobId), body);
  }

  async hasResult(jobId: string): Promise<boolean> {
    return this.bucket.objects.has(this.names.resultKey(jobId));
  }

  async getResult(jobId: string): Promise<Uint8Array | undefined> {
    return this.bucket.objects.get(this.names.resultKey(jobId));
  }

  async listResultIds(o: { cursor?: string; pageSize?: number } = {}): Promise<{ ids: string[]; cursor?: string }> {
    const size = o.pageSize ?? LIST_PAGE;
    // As S3 with Delimiter '/': only objects directly under the fleet's prefix, a page of keys at a time.
    const prefix = this.names.resultPrefix;
    const page = this.bucket.page(prefix, o.cursor, size, (k) => !k.includes('/', prefix.length));
    const ids = page.keys.map((k) => jobIdOfKey(this.fleetId, k)).filter((id): id is string => id !== undefined);
    return { ids, ...(page.more ? { cursor: page.keys[page.keys.length - 1]! } : {}) };
  }

  async deleteResult(jobId: string): Promise<void> {
    this.bucket.objects.delete(this.names.resultKey(jobId));
  }

  async getLedger(): Promise<QueueLedger | undefined> {
    const b = this.bucket.objects.get(this.names.ledgerKey);
    return b ? parseLedger(b, this.fleetId) : undefined;
  }

  async putLedger(ledger: QueueLedger): Promise<void> {
    this.bucket.put(this.names.ledgerKey, JSON.stringify(ledger));
  }

  async putErrorMarker(marker: ErrorMarker): Promise<void> {
    this.bucket.put(this.names.errorKey(marker.kind, marker.job_id), JSON.stringify(marker));
  }

  async listErrorMarkers(): Promise<Array<{ jobId: string; kind: ErrorMarker['kind'] }>> {
    return this.bucket
      .keys(this.names.errorPrefix)
      .map((k) => errorMarkerOfKey(this.fleetId, k))
      .filter((m): m is { jobId: string; kind: ErrorMarker['kind'] } => m !== undefined);
  }

  async deleteErrorMarker(jobId: string, kind: ErrorMarker['kind']): Promise<void> {
    this.bucket.objects.delete(this.names.errorKey(kind, jobId));
  }

  async putManifest(manifest: AnyManifest): Promise<PutOutcome> {
    return this.bucket.putIfAbsent(this.names.manifestKey, JSON.stringify(manifest));
  }

  async getManifest(): Promise<AnyManifest | undefined> {
    const b = this.bucket.objects.get(this.names.manifestKey);
    return b ? parseManifest(Buffer.from(b).toString('utf8'), this.fleetId) : undefined;
  }

  async putInput(jobId: string, body: Uint8Array): Promise<PutOutcome> {
    return this.bucket.putIfAbsent(this.names.inputKey(jobId), body);
  }

  async getInput(jobId: string): Promise<Uint8Array | undefined> {
    return this.bucket.objects.get(this.names.inputKey(jobId));
  }

  async listInputIds(): Promise<Set<string>> {
    const prefix = this.names.inputPrefix;
    return new Set(this.bucket.keys(prefix).map((k) => /^([A-Za-z0-9._-]+)\.eval$/.exec(k.slice(prefix.length))?.[1]).filter((id): id is string => id !== undefined));
  }

  async putArtifact(sha: string, body: Uint8Array): Promise<PutOutcome> {
    return this.bucket.putIfAbsent(artifactKey(sha), body);
  }

  async getArtifact(sha: string): Promise<Uint8Array | undefined> {
    return this.bucket.objects.get(artifactKey(sha));
  }

  async putLog(worker: string, name: string, body: Uint8Array | string): Promise<void> {
    this.bucket.put(this.names.logKey(worker, name), body);
  }
}

function bytes(body: Uint8Array | string): Uint8Array {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Uint8Array.from(body);
}

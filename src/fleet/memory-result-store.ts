/**
 * `ResultStore` in memory, over a `MemoryBucket` shared by the controller and workers of one
 * test: the same semantics as `S3ResultStore` (test/fleet/result-store-conformance runs against
 * both), including first-writer-wins puts and paged listing in key order.
 */
import { artifactKey, errorMarkerOfKey, fleetNames, jobIdOfKey, parseLedger, parseManifest, type ErrorMarker, type AnyManifest, type FleetNames, type QueueLedger } from './protocol.js';
import type { PutOutcome, ResultStore } from './types.js';

/** A bucket's objects by key (one map stands in for one S3 bucket). */
export class MemoryBucket {
  readonly objects = new Map<string, Uint8Array>();

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
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  }
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
    const keys = this.bucket.keys(this.names.resultPrefix).filter((k) => !k.slice(this.names.resultPrefix.length).includes('/'));
    const start = o.cursor === undefined ? 0 : keys.findIndex((k) => k > o.cursor!);
    const page = start < 0 ? [] : keys.slice(start, start + size);
    const more = start >= 0 && start + size < keys.length;
    const ids = page.map((k) => jobIdOfKey(this.fleetId, k)).filter((id): id is string => id !== undefined);
    return { ids, ...(more ? { cursor: page[page.length - 1]! } : {}) };
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

/**
 * `ResultStore` over S3: one fleet's results, manifest and worker logs under `{fleet_id}/`, and
 * the bucket-wide code artifacts under `artifacts/`. Results, the manifest and artifacts are
 * written with `If-None-Match: *`, so the first writer wins and a late duplicate is reported
 * instead of overwriting; every object is encrypted at rest (SSE-S3, AES256).
 */
import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { awsErrorName, cloudError } from '../errors.js';
import { artifactKey, errorMarkerOfKey, fleetNames, jobIdOfKey, parseLedger, parseManifest, type ErrorMarker, type AnyManifest, type FleetNames, type QueueLedger } from './protocol.js';
import type { PutOutcome, ResultStore } from './types.js';

/** Server-side encryption for every object (S3-managed keys: no KMS permissions needed). */
const SSE = 'AES256' as const;

/** Keys per list page (S3's maximum). */
const LIST_PAGE = 1000;

export interface S3ResultStoreOptions {
  s3: S3Client;
  /** Config `fleet.bucket` (default `lb-fleet-results-migrated`). */
  bucket: string;
  fleetId: string;
}

export class S3ResultStore implements ResultStore {
  readonly fleetId: string;
  readonly bucket: string;
  readonly names: FleetNames;
  private readonly s3: S3Client;

  constructor(o: S3ResultStoreOptions) {
    this.s3 = o.s3;
    this.bucket = o.bucket;
    this.fleetId = o.fleetId;
    // Queue names are not used here; the prefix only has to be valid.
    this.names = fleetNames(o.fleetId, '');
  }

  /** Creates the bucket when it is missing (the controller's first run in an account); workers never call this. */
  async ensureBucket(): Promise<void> {
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (e) {
      if (!notFound(e)) throw cloudError(e, `checking bucket ${this.bucket}`);
      try {
        await this.s3.send(new CreateBucketCommand({ Bucket: this.bucket }));
      } catch (e2) {
        if (!/BucketAlreadyOwnedByYou/.test(awsErrorName(e2))) throw cloudError(e2, `creating bucket ${this.bucket}`);
      }
    }
  }

  putResult(jobId: string, body: Uint8Array): Promise<PutOutcome> {
    return this.putIfAbsent(this.names.resultKey(jobId), body, 'application/zip');
  }

  hasResult(jobId: string): Promise<boolean> {
    return this.has(this.names.resultKey(jobId));
  }

  getResult(jobId: string): Promise<Uint8Array | undefined> {
    return this.get(this.names.resultKey(jobId));
  }

  async listResultIds(o: { cursor?: string; pageSize?: number } = {}): Promise<{ ids: string[]; cursor?: string }> {
    const r = await this.call(`listing results of fleet ${this.fleetId}`, () =>
      this.s3.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: this.names.resultPrefix,
          // Results are the objects directly under the prefix; logs/ is one common prefix, not listed.
          Delimiter: '/',
          MaxKeys: o.pageSize ?? LIST_PAGE,
          ...(o.cursor ? { ContinuationToken: o.cursor } : {}),
        }),
      ),
    );
    const ids: string[] = [];
    for (const c of r.Contents ?? []) {
      const id = c.Key ? jobIdOfKey(this.fleetId, c.Key) : undefined;
      if (id) ids.push(id);
    }
    return { ids, ...(r.IsTruncated && r.NextContinuationToken ? { cursor: r.NextContinuationToken } : {}) };
  }

  async deleteResult(jobId: string): Promise<void> {
    await this.remove(this.names.resultKey(jobId));
  }

  async getLedger(): Promise<QueueLedger | undefined> {
    const bytes = await this.get(this.names.ledgerKey);
    return bytes ? parseLedger(bytes, this.fleetId) : undefined;
  }

  async putLedger(ledger: QueueLedger): Promise<void> {
    await this.put(this.names.ledgerKey, JSON.stringify(ledger), 'application/json');
  }

  async putErrorMarker(marker: ErrorMarker): Promise<void> {
    await this.put(this.names.errorKey(marker.kind, marker.job_id), JSON.stringify(marker), 'application/json');
  }

  async listErrorMarkers(): Promise<Array<{ jobId: string; kind: ErrorMarker['kind'] }>> {
    const out: Array<{ jobId: string; kind: ErrorMarker['kind'] }> = [];
    let cursor: string | undefined;
    do {
      const r = await this.call(`listing error results of fleet ${this.fleetId}`, () =>
        this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.names.errorPrefix, MaxKeys: LIST_PAGE, ...(cursor ? { ContinuationToken: cursor } : {}) })),
      );
      for (const c of r.Contents ?? []) {
        const m = c.Key ? errorMarkerOfKey(this.fleetId, c.Key) : undefined;
        if (m) out.push(m);
      }
      cursor = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (cursor);
    return out;
  }

  async deleteErrorMarker(jobId: string, kind: ErrorMarker['kind']): Promise<void> {
    await this.remove(this.names.errorKey(kind, jobId));
  }

  putManifest(manifest: AnyManifest): Promise<PutOutcome> {
    return this.putIfAbsent(this.names.manifestKey, JSON.stringify(manifest), 'application/json');
  }

  async getManifest(): Promise<AnyManifest | undefined> {
    const bytes = await this.get(this.names.manifestKey);
    return bytes ? parseManifest(Buffer.from(bytes).toString('utf8'), this.fleetId) : undefined;
  }

  putInput(jobId: string, body: Uint8Array): Promise<PutOutcome> {
    return this.putIfAbsent(this.names.inputKey(jobId), body, 'application/zip');
  }

  getInput(jobId: string): Promise<Uint8Array | undefined> {
    return this.get(this.names.inputKey(jobId));
  }

  async listInputIds(): Promise<Set<string>> {
    const ids = new Set<string>();
    let cursor: string | undefined;
    do {
      const r = await this.call(`listing inputs of fleet ${this.fleetId}`, () =>
        this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.names.inputPrefix, MaxKeys: LIST_PAGE, ...(cursor ? { ContinuationToken: cursor } : {}) })),
      );
      for (const c of r.Contents ?? []) {
        const m = c.Key ? /^([A-Za-z0-9._-]+)\.eval$/.exec(c.Key.slice(this.names.inputPrefix.length)) : null;
        if (m) ids.add(m[1]!);
      }
      cursor = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (cursor);
    return ids;
  }

  async putArtifact(sha: string, body: Uint8Array): Promise<PutOutcome> {
    const key = artifactKey(sha);
    // A HEAD first spares uploading a large archive that is already there.
    if (await this.has(key)) return { stored: false };
    return this.putIfAbsent(key, body, 'application/gzip');
  }

  getArtifact(sha: string): Promise<Uint8Array | undefined> {
    return this.get(artifactKey(sha));
  }

  async putLog(worker: string, name: string, body: Uint8Array | string): Promise<void> {
    const key = this.names.logKey(worker, name);
    await this.call(`uploading s3://${this.bucket}/${key}`, () =>
      this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: 'text/plain', ServerSideEncryption: SSE })),
    );
  }

  private async put(key: string, body: string, contentType: string): Promise<void> {
    await this.call(`uploading s3://${this.bucket}/${key}`, () =>
      this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType, ServerSideEncryption: SSE })),
    );
  }

  private async remove(key: string): Promise<void> {
    await this.call(`deleting s3://${this.bucket}/${key}`, () => this.s3.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })));
  }

  private async putIfAbsent(key: string, body: Uint8Array | string, contentType: string): Promise<PutOutcome> {
    try {
      await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType, ServerSideEncryption: SSE, IfNoneMatch: '*' }));
      return { stored: true };
    } catch (e) {
      if (awsErrorName(e) === 'PreconditionFailed' || statusOf(e) === 412) return { stored: false };
      throw cloudError(e, `uploading s3://${this.bucket}/${key}`);
    }
  }

  private async has(key: string): Promise<boolean> {
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (e) {
      if (notFound(e)) return false;
      throw cloudError(e, `checking s3://${this.bucket}/${key}`);
    }
  }

  private async get(key: string): Promise<Uint8Array | undefined> {
    try {
      const r = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return await r.Body!.transformToByteArray();
    } catch (e) {
      // A missing bucket is an error (NoSuchBucket), not a missing result.
      if (awsErrorName(e) === 'NoSuchKey') return undefined;
      throw cloudError(e, `downloading s3://${this.bucket}/${key}`);
    }
  }

  private async call<T>(doing: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw cloudError(e, doing);
    }
  }
}

function statusOf(e: unknown): number | undefined {
  return (e as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

/** HEAD answers have no body, so a missing key or bucket is only a 404 (`NotFound`). */
function notFound(e: unknown): boolean {
  return statusOf(e) === 404 || /^(NotFound|NoSuchKey|NoSuchBucket)$/.test(awsErrorName(e));
}

/**
 * What the controller and the worker need from the fleet's queues and bucket, as one narrow
 * seam over `FleetStore` (SQS and S3). Temporary: it is replaced by the `JobQueue` and
 * `ResultStore` interfaces of `fleet/types.ts` and their adapters once those exist; until then
 * only the calls missing from `FleetStore` (conditional, encrypted result writes; existence
 * checks; failure records) are written here.
 *
 * Glossary: a *result* is `{fleet_id}/{job_id}.eval`; a *failure record* is
 * `{fleet_id}/failed/{job_id}.json`, written by the controller when SQS moved the job to the
 * dead-letter queue, so a resumed controller knows the job is finished without reading the DLQ.
 */
import { DeleteObjectsCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { CloudError } from '../errors.js';
import type { FleetQueues, FleetStore, ReceivedMessage } from './fleet-store.js';

export type { FleetQueues, ReceivedMessage };

/** Why a job ended without a result, as the controller records it. */
export interface FailureRecord {
  job_id: string;
  error: string;
  /** Deliveries SQS made before giving up. */
  attempts: number;
  /** Workers that tried it, in order. */
  workers: string[];
}

/** `written`: this call stored the object; `exists`: another writer was first (kept as it is). */
export type PutOutcome = 'written' | 'exists';

export class FleetIo {
  constructor(
    readonly store: FleetStore,
    private readonly s3: S3Client,
  ) {}

  get fleetId(): string {
    return this.store.fleetId;
  }

  get bucket(): string {
    return this.store.bucket;
  }

  get names() {
    return this.store.names;
  }

  /** Key of a job's failure record. */
  failureKey(jobId: string): string {
    return `${this.store.fleetId}/failed/${jobId}.json`;
  }

  /**
   * Stores `body` at `key` with server-side encryption, only when no object is there yet
   * (`If-None-Match: *`): the first writer wins, a late duplicate is told so and stores nothing.
   */
  async putOnce(key: string, body: Uint8Array | string, contentType = 'application/octet-stream'): Promise<PutOutcome> {
    try {
      await this.s3.send(
        new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType, ServerSideEncryption: 'AES256', IfNoneMatch: '*' }),
      );
      return 'written';
    } catch (e) {
      const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status === 412 || (e as { name?: string }).name === 'PreconditionFailed') return 'exists';
      throw new CloudError(`uploading s3://${this.bucket}/${key}: ${(e as Error).message}`, transientStatus(status));
    }
  }

  /** Whether the object exists. */
  async has(key: string): Promise<boolean> {
    try {
      await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return true;
    } catch (e) {
      const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (status === 404) return false;
      throw new CloudError(`checking s3://${this.bucket}/${key}: ${(e as Error).message}`, transientStatus(status));
    }
  }

  /** Job ids with a failure record (all pages). */
  async failedJobIds(): Promise<Set<string>> {
    const prefix = `${this.fleetId}/failed/`;
    const ids = new Set<string>();
    let token: string | undefined;
    do {
      let r;
      try {
        r = await this.s3.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      } catch (e) {
        const status = (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        throw new CloudError(`listing failure records: ${(e as Error).message}`, transientStatus(status));
      }
      for (const o of r.Contents ?? []) {
        const m = o.Key ? /^([A-Za-z0-9._-]+)\.json$/.exec(o.Key.slice(prefix.length)) : null;
        if (m) ids.add(m[1]!);
      }
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return ids;
  }

  /** Deletes every object under the fleet's prefix (`--new-fleet`); the code artifacts stay. */
  async deleteFleetObjects(): Promise<number> {
    let n = 0;
    let token: string | undefined;
    do {
      const r = await this.s3
        .send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${this.fleetId}/`, ContinuationToken: token }))
        .catch((e) => {
          if ((e as { name?: string }).name === 'NoSuchBucket') return undefined;
          throw new CloudError(`listing s3://${this.bucket}/${this.fleetId}/: ${(e as Error).message}`, true);
        });
      const keys = (r?.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length) await this.s3.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys, Quiet: true } }));
      n += keys.length;
      token = r?.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return n;
  }

  async readFailure(jobId: string): Promise<FailureRecord | undefined> {
    const b = await this.store.get(this.failureKey(jobId));
    if (!b) return undefined;
    return JSON.parse(b.toString('utf8')) as FailureRecord;
  }
}

/** Throttling, 5xx and network failures (no HTTP status) are worth another try. */
function transientStatus(status: number | undefined): boolean {
  return !status || status >= 500 || status === 429;
}

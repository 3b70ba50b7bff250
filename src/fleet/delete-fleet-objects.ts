/**
 * `--new-fleet`: removes everything an earlier run of the same fleet left under `{fleet_id}/`
 * in the bucket (manifest, results, worker logs), so the fleet starts over. Code artifacts are
 * shared by fleets and stay.
 */
import { DeleteObjectsCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { awsErrorName, cloudError } from '../errors.js';

/** Deletes the fleet's objects; returns how many. A missing bucket has none. */
export async function deleteFleetObjects(s3: S3Client, bucket: string, fleetId: string): Promise<number> {
  let n = 0;
  let token: string | undefined;
  do {
    let r;
    try {
      r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${fleetId}/`, ContinuationToken: token }));
    } catch (e) {
      if (awsErrorName(e) === 'NoSuchBucket') return 0;
      throw cloudError(e, `listing s3://${bucket}/${fleetId}/`);
    }
    const keys = (r.Contents ?? []).map((o) => ({ Key: o.Key! }));
    if (keys.length) {
      try {
        await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
      } catch (e) {
        throw cloudError(e, `deleting the objects of fleet ${fleetId}`);
      }
    }
    n += keys.length;
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  return n;
}

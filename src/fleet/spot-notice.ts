/**
 * A spot instance's interruption notice, from its instance metadata (IMDSv2):
 * `spot/instance-action` answers 404 until AWS decides to reclaim the instance, then
 * `{"action": "terminate"|"stop"|"hibernate", "time": "<UTC>"}`, about two minutes ahead.
 */
import { CloudError } from '../errors.js';

/** Seconds one metadata request may take (the service is local to the instance). */
const IMDS_TIMEOUT_MS = 2000;

/** When the instance will be interrupted, or undefined while there is no notice. */
export async function spotInterruptionTime(endpoint: string): Promise<Date | undefined> {
  const base = endpoint.replace(/\/+$/, '');
  const t = await fetch(`${base}/latest/api/token`, { method: 'PUT', headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '300' }, signal: AbortSignal.timeout(IMDS_TIMEOUT_MS) });
  if (!t.ok) throw new CloudError(`instance metadata refused a token (HTTP ${t.status})`, true);
  const r = await fetch(`${base}/latest/meta-data/spot/instance-action`, { headers: { 'X-aws-ec2-metadata-token': await t.text() }, signal: AbortSignal.timeout(IMDS_TIMEOUT_MS) });
  if (r.status === 404) return undefined;
  if (!r.ok) throw new CloudError(`instance metadata spot/instance-action answered HTTP ${r.status}`, true);
  const body = (await r.json()) as { action?: string; time?: string };
  const at = body.time ? new Date(body.time) : undefined;
  return at && !Number.isNaN(at.getTime()) ? at : new Date();
}

import type { IAMClient } from '@aws-sdk/client-iam';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SSMClient } from '@aws-sdk/client-ssm';
import { STSClient } from '@aws-sdk/client-sts';
import { recordCalls } from './call-recorder.js';

// The EC2 clients live in ec2-clients.ts: the EC2 SDK alone takes ~0.65 s to load, which a
// fleet's controller and every worker on local or external machines would otherwise pay.

/** Attempts per AWS call (the SDK's standard retry mode: throttling and 5xx are retried, jittered). */
export const MAX_ATTEMPTS = 5;

/**
 * STS is asked once, who the caller is, before anything starts. Its answer takes well under a
 * second, so an endpoint that accepts no connection in 5 s or stays silent for 10 s is not
 * answering, and 3 attempts end the wait in about half a minute instead of never (the SDK's
 * default has no timeout). Credential providers (SSO, credential_process) run before the
 * request and are not limited by this.
 */
export const STS_OPTIONS = {
  maxAttempts: 3,
  requestHandler: { connectionTimeout: 5_000, requestTimeout: 10_000, throwOnRequestTimeout: true },
};

/**
 * Lets the AWS SDK see the AWS_* settings from `.env` as it sees the real environment's:
 * AWS_PROFILE, keys, AWS_CONFIG_FILE, AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>
 * (e.g. AWS_ENDPOINT_URL_EC2_INSTANCE_CONNECT). The SDK reads only process.env, so they are
 * copied there; variables already set in the environment are left alone (they win over .env).
 * Also silences the SDK's Node-version notice, which is noise for ct's users (ct supports Node 20).
 */
export function applyAwsEnvironment(awsEnv: Record<string, string>): void {
  for (const [k, v] of Object.entries(awsEnv)) if (process.env[k] === undefined) process.env[k] = v;
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
}

/** The clients fleet mode adds: SQS for jobs, S3 for results, SSM for the fleet's secrets. */
export interface FleetClients {
  region: string;
  sqs: SQSClient;
  s3: S3Client;
  ssm: SSMClient;
  /** For the caller's identity (credentials check, LaunchedBy tags). */
  sts: STSClient;
}

/**
 * SQS, S3 and SSM clients for one region (creating one makes no call). S3 uses path-style addressing when an endpoint is set
 * (AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3): API-compatible servers on a plain host:port have
 * no per-bucket host names.
 */
export function createFleetClients(region: string): FleetClients {
  // The middleware stack resolved once per command type, not on every call: ~0.6 ms of CPU per
  // S3 GetObject (a quarter of its cost) measured in the merge of a fleet's results, one GET each.
  // Safe because middleware is only added as a client is made (call-recorder.ts).
  const common = { region, maxAttempts: MAX_ATTEMPTS, cacheMiddleware: true };
  const customS3 = Boolean(process.env.AWS_ENDPOINT_URL_S3 || process.env.AWS_ENDPOINT_URL);
  return {
    region,
    sqs: recordCalls(new SQSClient(common)),
    s3: recordCalls(new S3Client({ ...common, forcePathStyle: customS3 })),
    ssm: recordCalls(new SSMClient(common)),
    sts: recordCalls(new STSClient({ ...common, ...STS_OPTIONS })),
  };
}

/**
 * An IAM client (IAM is global; `region` only picks the partition's endpoint), for the fleet's
 * read-only check of the workers' instance profile. Loaded on demand: only EC2 fleets use it.
 */
export async function createIamClient(region: string): Promise<IAMClient> {
  const { IAMClient } = await import('@aws-sdk/client-iam');
  return recordCalls(new IAMClient({ region, maxAttempts: MAX_ATTEMPTS }));
}

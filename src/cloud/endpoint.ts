/**
 * The address an AWS client sends its calls to, for messages about an endpoint that does not
 * answer: the configured one (AWS_ENDPOINT_URL_<SERVICE>, else AWS_ENDPOINT_URL, as the SDK reads
 * them), else the one the SDK's own endpoint rules give for the client's region.
 */
import { ConfigError, errorMessage, isUnansweredAwsCall } from '../errors.js';

/** A service as the SDK spells it in AWS_ENDPOINT_URL_<SERVICE>. */
export type ServiceId = 'STS' | 'S3' | 'IAM' | 'SQS' | 'SSM' | 'EC2';

/** The part of an SDK client this needs (every v3 client has it). */
export interface EndpointClient {
  config: {
    region: () => Promise<string>;
    endpointProvider(params: { Region?: string; UseFIPS?: boolean; UseDualStack?: boolean }): { url: URL };
  };
}

/** Where `client` sends its calls, as a URL (best effort: the service and region when the rules cannot say). */
export async function serviceEndpoint(client: EndpointClient, service: ServiceId, awsEnv: Record<string, string>): Promise<string> {
  const configured = configuredEndpoint(service, awsEnv);
  if (configured) return configured.url;
  let region = '';
  try {
    region = await client.config.region();
    return client.config.endpointProvider({ Region: region, UseFIPS: false, UseDualStack: false }).url.href.replace(/\/$/, '');
  } catch {
    return `${service} in ${region || 'the configured region'}`;
  }
}

/** The endpoint set for `service` in the environment, and the variable that set it. */
export function configuredEndpoint(service: ServiceId, awsEnv: Record<string, string>): { url: string; variable: string } | undefined {
  if (/^(1|true)$/i.test(awsEnv.AWS_IGNORE_CONFIGURED_ENDPOINT_URLS ?? '')) return undefined;
  for (const variable of [`AWS_ENDPOINT_URL_${service}`, 'AWS_ENDPOINT_URL']) {
    const url = awsEnv[variable];
    if (url) return { url, variable };
  }
  return undefined;
}

/**
 * A fleet on SQS- and S3-compatible servers of the user's own, without AWS: SQS and S3 have
 * endpoints of their own (AWS_ENDPOINT_URL_SQS / _S3, or fleet.sqs_endpoint / s3_endpoint) and
 * neither STS nor SSM has one (not even AWS_ENDPOINT_URL). Then nothing else is called: the
 * caller's name (for tags) is the local user's and the fleet's secrets stay in each worker's
 * environment (`--secrets env`).
 */
export function fleetWithoutAws(awsEnv: Record<string, string>): boolean {
  const own = (service: ServiceId) => {
    const c = configuredEndpoint(service, awsEnv);
    return c !== undefined && c.variable !== 'AWS_ENDPOINT_URL';
  };
  return own('SQS') && own('S3') && configuredEndpoint('STS', awsEnv) === undefined && configuredEndpoint('SSM', awsEnv) === undefined;
}

/**
 * A ConfigError for a call that got no answer at all (`isUnansweredAwsCall`), naming the endpoint
 * and what sets it; undefined for any other failure. `doing` says what ct was doing, e.g.
 * "checking your credentials".
 */
export async function unreachableEndpointError(
  e: unknown,
  o: { client: EndpointClient; service: ServiceId; serviceName: string; awsEnv: Record<string, string>; doing: string },
): Promise<ConfigError | undefined> {
  if (!isUnansweredAwsCall(e)) return undefined;
  const endpoint = await serviceEndpoint(o.client, o.service, o.awsEnv);
  const configured = configuredEndpoint(o.service, o.awsEnv);
  let region = '';
  try {
    region = await o.client.config.region();
  } catch {
    // Named only in the hint.
  }
  const hint = configured
    ? `check ${configured.variable}=${configured.url}`
    : `check the region (${region || 'unknown'}; ec2.region, CT_EC2_REGION or --region) and this machine's network (proxy, VPN, firewall)`;
  return new ConfigError(`${o.serviceName} does not answer at ${endpoint} (${reason(e)}) while ${o.doing}: ${hint}`);
}

/** The first line of the network error (e.g. `connect ECONNREFUSED 127.0.0.1:1`). */
function reason(e: unknown): string {
  const err = e as { name?: string; code?: string };
  const line = errorMessage(e).split('\n')[0]!.replace(/^@smithy\/node-http-handler - \[ERROR\] /, '');
  if (err.name === 'TimeoutError') return `no answer in time: ${line}`;
  return line || err.code || 'no answer';
}

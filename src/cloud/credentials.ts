import { GetCallerIdentityCommand } from '@aws-sdk/client-sts';
import { ConfigError, cloudError } from '../errors.js';
import type { AwsClients } from './ec2-clients.js';
import { unreachableEndpointError } from './endpoint.js';

/** Who is calling AWS: the account and the name instances are tagged with (LaunchedBy). */
export interface CallerIdentity {
  arn: string;
  account: string;
  /** The IAM user name, or the role session name (which IAM Identity Center sets to the SSO user name). */
  name: string;
}

/**
 * Refuses a configuration whose credentials are ambiguous: with AWS_PROFILE and
 * AWS_ACCESS_KEY_ID both set, one silently wins (the SDK and the AWS CLI even disagree which),
 * so EC2 commands stop before anything is launched and say which lines to remove.
 */
export function checkCredentialSources(awsEnv: Record<string, string>): void {
  const profile = awsEnv.AWS_PROFILE;
  if (profile && awsEnv.AWS_ACCESS_KEY_ID) {
    throw new ConfigError(
      `both AWS_PROFILE (${profile}) and AWS_ACCESS_KEY_ID are set, so it is ambiguous which AWS credentials to use; ` +
        'EC2 commands refuse to start.\n' +
        `  To use the profile (SSO): remove the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) lines from your .env, or unset them in your shell.\n` +
        '  To use the static keys: remove the AWS_PROFILE line instead.',
    );
  }
}

/** The caller's name from an ARN: `user/NAME` for IAM users, the session name for assumed roles. */
export function callerName(arn: string): string {
  const resource = arn.split(':').slice(5).join(':');
  const parts = resource.split('/');
  if (parts[0] === 'assumed-role' && parts.length >= 3) return parts.slice(2).join('/');
  if (parts[0] === 'user' && parts.length >= 2) return parts[parts.length - 1]!;
  if (resource === 'root') return 'root';
  return parts[parts.length - 1] || arn;
}

/**
 * Resolves credentials and asks STS who they belong to, turning the usual failures into
 * instructions: an expired or missing SSO login, no credentials at all, rejected keys.
 * Runs before anything is created. Never includes secret values in messages.
 */
export async function preflightCredentials(clients: Pick<AwsClients, 'sts'>, awsEnv: Record<string, string>): Promise<CallerIdentity> {
  checkCredentialSources(awsEnv);
  const profile = awsEnv.AWS_PROFILE;
  try {
    const r = await clients.sts.send(new GetCallerIdentityCommand({}));
    const arn = r.Arn ?? '';
    return { arn, account: r.Account ?? '', name: callerName(arn) };
  } catch (e) {
    // An endpoint that does not answer (a wrong AWS_ENDPOINT_URL or region, no network) is a setting to fix: exit 2.
    const unreachable = await unreachableEndpointError(e, { client: clients.sts, service: 'STS', serviceName: 'AWS STS', awsEnv, doing: 'checking your credentials' });
    throw unreachable ?? credentialError(e, profile);
  }
}

function credentialError(e: unknown, profile: string | undefined): Error {
  const err = e as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const msg = err.message ?? String(e);
  const name = err.name ?? '';
  if (/sso/i.test(msg) && (name === 'CredentialsProviderError' || /token|session|expired|login/i.test(msg))) {
    return new ConfigError(
      `your AWS SSO session${profile ? ` for profile ${profile}` : ''} has expired or was never started. Log in and run again:\n` +
        `  aws sso login --profile ${profile ?? 'default'}`,
    );
  }
  if (name === 'CredentialsProviderError') {
    return new ConfigError(
      `no AWS credentials found (${msg.split('\n')[0]}). Either use SSO: put AWS_PROFILE=<profile> in .env and run ` +
        '`aws sso login --profile <profile>`; or put AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in .env.',
    );
  }
  if (/InvalidClientTokenId|SignatureDoesNotMatch|ExpiredToken|UnrecognizedClient|AccessDenied/.test(name)) {
    return new ConfigError(
      `AWS rejected your credentials (${name}: ${msg}). Check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY in .env, ` +
        'or for SSO run `aws sso login --profile <profile>`.',
    );
  }
  return cloudError(e, 'cannot reach AWS STS to check your credentials');
}

/**
 * The controller's checks of what a fleet needs that can be known before anything exists: the
 * bucket (reachable, not someone else's), the EC2 workers' instance profile, and a remote
 * sandbox host that `local:` workers would reach from this machine. Each runs after the
 * credentials check and before the estimate, so a problem stops the run with a ConfigError
 * (exit 2) that says what to do, and no queue, object, parameter, security group or instance
 * is created. Every call here is read-only.
 *
 * Checked elsewhere, earlier still: the bucket's name (config schema), the endpoints answering
 * (credentials preflight) and settings registered as git repositories for workers elsewhere
 * (settings-pin.ts).
 */
import { HeadBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Config } from '../config/config.js';
import { ConfigError, CtError, awsErrorName, cloudError, errorMessage } from '../errors.js';
import type { WorkersSpec } from './launcher.js';

export interface FleetPreflightInput {
  config: Config;
  workers: WorkersSpec;
  /** `--sandbox` as given. */
  sandbox: string;
  /** The fleet's S3 client (the result store's). */
  s3: S3Client;
  /** A check that could not be made (no permission to read something) is said, not fatal. */
  warn: (line: string) => void;
}

/** Checks the fleet's bucket, instance profile and sandbox host; throws a ConfigError saying what to fix. */
export async function preflightFleet(input: FleetPreflightInput): Promise<void> {
  const { config, workers } = input;
  if (workers.kind === 'local' && input.sandbox.startsWith('ssh://')) await checkSshSandbox(config, input.sandbox);
  await checkBucket(input.s3, config);
  if (workers.kind === 'ec2') await checkInstanceProfile(config, input.warn);
}

/**
 * HeadBucket: 200 is the bucket, 404 one ct creates before the first upload; 403 is a bucket of
 * another account (names are global across accounts) or one these credentials may not list,
 * and 301 one in another region.
 */
async function checkBucket(s3: S3Client, config: Config): Promise<void> {
  const bucket = config.fleet.bucket;
  const region = config.ec2.region;
  try {
    await s3.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch (e) {
    const status = httpStatus(e);
    if (status === 404) return;
    if (status === 403) {
      throw new ConfigError(
        `no access to bucket ${bucket} (owned by another account?). Bucket names are global across AWS accounts: ` +
          'pick a name of your own with fleet.bucket (CT_FLEET_BUCKET), or get s3:ListBucket on this one (ops/docs/fleet-iam-policy.json)',
      );
    }
    const elsewhere = bucketRegion(e);
    if (status === 301 || (elsewhere && elsewhere !== region)) {
      throw new ConfigError(
        `bucket ${bucket} is in ${elsewhere ? `region ${elsewhere}` : 'another region'}, and the fleet runs in ${region}: ` +
          `run the fleet there (ec2.region, CT_EC2_REGION${elsewhere ? `=${elsewhere}` : ''}), or pick another bucket (fleet.bucket, CT_FLEET_BUCKET)`,
      );
    }
    const { unreachableEndpointError } = await import('../cloud/endpoint.js');
    const unreachable = await unreachableEndpointError(e, { client: s3, service: 'S3', serviceName: 'S3', awsEnv: config.aws_env, doing: `checking bucket ${bucket}` });
    throw unreachable ?? cloudError(e, `checking bucket ${bucket}`);
  }
}

/**
 * EC2 workers run with `fleet.instance_profile`; RunInstances refuses a profile that does not
 * exist only after the queues and jobs are in place, and a profile without a role gives workers
 * no access to the queues or the bucket. A caller not allowed to read the profile
 * (iam:GetInstanceProfile, added to the policy later than the rest) gets a warning instead.
 */
async function checkInstanceProfile(config: Config, warn: (line: string) => void): Promise<void> {
  const name = config.fleet.instance_profile;
  const { createIamClient } = await import('../cloud/aws-clients.js');
  const { GetInstanceProfileCommand } = await import('@aws-sdk/client-iam');
  const iam = await createIamClient(config.ec2.region);
  try {
    const r = await iam.send(new GetInstanceProfileCommand({ InstanceProfileName: name }));
    if (!r.InstanceProfile?.Roles?.length) {
      throw new ConfigError(
        `instance profile ${name} (fleet.instance_profile, CT_FLEET_INSTANCE_PROFILE) has no role, so EC2 workers would have no access to the fleet's queues and bucket. ` +
          `Add the worker role to it (its policy: ops/docs/fleet-worker-role-policy.json): aws iam add-role-to-instance-profile --instance-profile-name ${name} --role-name ROLE`,
      );
    }
  } catch (e) {
    if (e instanceof CtError) throw e;
    const code = awsErrorName(e);
    if (code === 'NoSuchEntity' || code === 'NoSuchEntityException') {
      throw new ConfigError(
        `instance profile ${name} (fleet.instance_profile, CT_FLEET_INSTANCE_PROFILE) does not exist; EC2 workers run with it. ` +
          `Create it with the worker role (its policy: ops/docs/fleet-worker-role-policy.json): aws iam create-instance-profile --instance-profile-name ${name}, ` +
          `then aws iam add-role-to-instance-profile --instance-profile-name ${name} --role-name ROLE; or name an existing one in CT_FLEET_INSTANCE_PROFILE`,
      );
    }
    if (/^(AccessDenied|AccessDeniedException|UnauthorizedOperation)$/.test(code)) {
      warn(`cannot check instance profile ${name} (${code}: iam:GetInstanceProfile is not allowed; see ops/docs/fleet-iam-policy.json); launching with it unchecked`);
      return;
    }
    const { unreachableEndpointError } = await import('../cloud/endpoint.js');
    const unreachable = await unreachableEndpointError(e, { client: iam, service: 'IAM', serviceName: 'AWS IAM', awsEnv: config.aws_env, doing: `checking instance profile ${name}` });
    throw unreachable ?? cloudError(e, `checking instance profile ${name}`);
  } finally {
    iam.destroy();
  }
}

/**
 * `local:` workers run their samples on the `ssh://` host from this machine: it must take an SSH
 * login and answer `docker version` now (the sandbox's own preflight), or every worker would
 * fail on it after the fleet exists. The connection is closed again; workers open their own.
 */
async function checkSshSandbox(config: Config, spec: string): Promise<void> {
  const { createProvider } = await import('../sandbox/registry.js');
  const { RunRegistry, newRunId } = await import('../sandbox/run-registry.js');
  const provider = await createProvider(spec, { config, runId: newRunId(), registry: new RunRegistry(config.state_dir), onNotice: () => {} });
  try {
    await provider.preflight?.();
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`--sandbox ${spec}: local workers run their samples there, and this machine cannot use it: ${errorMessage(e)}`, { cause: e });
  } finally {
    await provider.close?.().catch(() => {});
  }
}

function httpStatus(e: unknown): number | undefined {
  return (e as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

/** The region S3 says a bucket is in (the `x-amz-bucket-region` header of its answer). */
function bucketRegion(e: unknown): string | undefined {
  const headers = (e as { $response?: { headers?: Record<string, string> } } | undefined)?.$response?.headers ?? {};
  return headers['x-amz-bucket-region'] || undefined;
}

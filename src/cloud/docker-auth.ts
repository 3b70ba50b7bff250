/**
 * `ct cloud put-docker-auth`: stores the registry credentials workers and AMI builds log in with
 * (DOCKER_ORG_NAME, DOCKER_ORG_PAT from `.env` or the environment) in SSM under the spec's names
 * (`fleet.docker_org_name_parameter`, default /linuxbench/docker-org-name, as String;
 * `fleet.docker_org_pat_parameter`, default /linuxbench/docker-org-pat, as SecureString).
 */
import { PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { ConfigError, awsErrorName, cloudError } from '../errors.js';
import { MANAGED_BY, TAGS } from './tags.js';

export interface DockerAuthParameters {
  name: { parameter: string; value?: string };
  pat: { parameter: string; value?: string };
}

/** Stores both values (replacing earlier ones); returns the parameter names written. Values never reach a message. */
export async function putDockerAuth(ssm: SSMClient, p: DockerAuthParameters): Promise<string[]> {
  const missing = [!p.name.value && 'DOCKER_ORG_NAME', !p.pat.value && 'DOCKER_ORG_PAT'].filter(Boolean);
  if (missing.length) {
    throw new ConfigError(`${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set; put them in .env (DOCKER_ORG_NAME=<org>, DOCKER_ORG_PAT=<token>) and run again`);
  }
  await put(ssm, p.name.parameter, p.name.value!, 'String');
  await put(ssm, p.pat.parameter, p.pat.value!, 'SecureString');
  return [p.name.parameter, p.pat.parameter];
}

async function put(ssm: SSMClient, Name: string, Value: string, Type: 'String' | 'SecureString'): Promise<void> {
  try {
    // SSM refuses Tags together with Overwrite: tag on creation, overwrite an existing value untagged.
    await ssm.send(new PutParameterCommand({ Name, Value, Type, Tags: [{ Key: TAGS.managedBy, Value: MANAGED_BY }] }));
    return;
  } catch (e) {
    if (awsErrorName(e) !== 'ParameterAlreadyExists') throw withheld(e, Name);
  }
  try {
    await ssm.send(new PutParameterCommand({ Name, Value, Type, Overwrite: true }));
  } catch (e) {
    throw withheld(e, Name);
  }
}

/** SSM's validation messages can quote the value; keep only the error's name. */
function withheld(e: unknown, name: string): Error {
  const err = e as { name?: string; $metadata?: unknown; $fault?: string };
  return cloudError({ name: err.name, $metadata: err.$metadata, $fault: err.$fault, message: `${awsErrorName(e) || 'error'} (details withheld: they may quote the value)` }, `storing ${name} in SSM`);
}

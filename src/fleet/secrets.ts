/**
 * A fleet's secrets (model API keys; registry and git tokens) reach workers as SSM SecureString
 * parameters under `{secrets_prefix}{fleet_id}/NAME`, tagged with the fleet id and deleted when
 * the fleet ends. A worker reads them with its own credentials (the instance role on EC2) and
 * exports them by NAME. They are never in the manifest, a message, a log or a command line;
 * error messages name the parameter, never the value. `local:` workers inherit the controller's
 * environment instead.
 */
import { DeleteParametersCommand, GetParametersByPathCommand, PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import { TAGS } from '../cloud/tags.js';
import type { Config } from '../config/config.js';
import { ConfigError, awsErrorName, cloudError } from '../errors.js';

/** Secret names are the environment variable names workers export them as. */
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** SSM takes at most 10 names per DeleteParameters call. */
const DELETE_BATCH = 10;

/** The SSM path (ending in `/`) holding one fleet's secrets; `prefix` is config `fleet.secrets_prefix` (default `/linuxbench/fleet/`). */
export function fleetSecretsPath(prefix: string, fleetId: string): string {
  const base = prefix.startsWith('/') ? prefix : `/${prefix}`;
  return `${base.endsWith('/') ? base : `${base}/`}${fleetId}/`;
}

/** The secrets a worker needs, by environment variable name, from the compiled config (unset ones left out). */
export function fleetSecretsFromConfig(config: Pick<Config, 'models' | 'git' | 'fleet'>): Record<string, string> {
  const all: Record<string, string | undefined> = {
    ANTHROPIC_API_KEY: config.models.anthropic.api_key,
    OPENAI_API_KEY: config.models.openai.api_key,
    // Workers pull private settings with it (`ct settings pull`).
    GITHUB_TOKEN: config.git.token,
    // Private environment images (the spec's pass-through of DOCKER_ORG_NAME / DOCKER_ORG_PAT).
    DOCKER_ORG_NAME: config.fleet.docker_org_name,
    DOCKER_ORG_PAT: config.fleet.docker_org_pat,
  };
  return Object.fromEntries(Object.entries(all).filter((e): e is [string, string] => Boolean(e[1])));
}

/** Stores each secret as a SecureString `{path}NAME` tagged `FleetId`, replacing an earlier value; returns the parameter names. */
export async function putFleetSecrets(ssm: SSMClient, prefix: string, fleetId: string, secrets: Record<string, string>): Promise<string[]> {
  const path = fleetSecretsPath(prefix, fleetId);
  for (const name of Object.keys(secrets)) {
    if (!SECRET_NAME.test(name)) throw new ConfigError(`fleet secret name ${JSON.stringify(name)} is not an environment variable name`);
  }
  const names: string[] = [];
  for (const [name, value] of Object.entries(secrets)) {
    if (!value) continue;
    const Name = `${path}${name}`;
    try {
      // SSM refuses tags together with Overwrite: tag on creation, overwrite a resumed fleet's value untagged.
      await ssm.send(new PutParameterCommand({ Name, Value: value, Type: 'SecureString', Tags: [{ Key: TAGS.fleetId, Value: fleetId }] }));
    } catch (e) {
      if (awsErrorName(e) !== 'ParameterAlreadyExists') throw cloudError(scrub(e), `storing fleet secret ${Name} in SSM`);
      try {
        await ssm.send(new PutParameterCommand({ Name, Value: value, Type: 'SecureString', Overwrite: true }));
      } catch (e2) {
        throw cloudError(scrub(e2), `storing fleet secret ${Name} in SSM`);
      }
    }
    names.push(Name);
  }
  return names;
}

/** The fleet's secrets by NAME (what a worker exports); empty when there are none. */
export async function readFleetSecrets(ssm: SSMClient, prefix: string, fleetId: string): Promise<Record<string, string>> {
  const path = fleetSecretsPath(prefix, fleetId);
  const out: Record<string, string> = {};
  let NextToken: string | undefined;
  do {
    let r;
    try {
      r = await ssm.send(new GetParametersByPathCommand({ Path: path, Recursive: false, WithDecryption: true, NextToken }));
    } catch (e) {
      throw cloudError(scrub(e), `reading fleet secrets under ${path} from SSM`);
    }
    for (const p of r.Parameters ?? []) {
      const name = p.Name?.slice(path.length);
      if (name && SECRET_NAME.test(name) && p.Value !== undefined) out[name] = p.Value;
    }
    NextToken = r.NextToken;
  } while (NextToken);
  return out;
}

/**
 * Makes the fleet's parameters exactly `secrets` (a resumed fleet gets this controller's values,
 * and a key no longer set here is removed); returns the parameter names stored.
 */
export async function replaceFleetSecrets(ssm: SSMClient, prefix: string, fleetId: string, secrets: Record<string, string>): Promise<string[]> {
  const stored = await putFleetSecrets(ssm, prefix, fleetId, secrets);
  const keep = new Set(stored);
  await deleteFleetSecrets(ssm, prefix, fleetId, (name) => !keep.has(name));
  return stored;
}

/** Deletes the parameters under the fleet's secrets path (those `which` selects, default all); returns the names deleted. */
export async function deleteFleetSecrets(ssm: SSMClient, prefix: string, fleetId: string, which: (name: string) => boolean = () => true): Promise<string[]> {
  const path = fleetSecretsPath(prefix, fleetId);
  const names: string[] = [];
  try {
    let NextToken: string | undefined;
    do {
      const r = await ssm.send(new GetParametersByPathCommand({ Path: path, Recursive: true, NextToken }));
      for (const p of r.Parameters ?? []) if (p.Name && which(p.Name)) names.push(p.Name);
      NextToken = r.NextToken;
    } while (NextToken);
    for (let i = 0; i < names.length; i += DELETE_BATCH) {
      await ssm.send(new DeleteParametersCommand({ Names: names.slice(i, i + DELETE_BATCH) }));
    }
  } catch (e) {
    throw cloudError(scrub(e), `deleting fleet secrets under ${path} from SSM`);
  }
  return names;
}

/**
 * SSM's validation messages can quote the request (`Value` included); keep only the error's
 * name and status so no secret reaches a message.
 */
function scrub(e: unknown): unknown {
  if (!e || typeof e !== 'object') return e;
  const err = e as { name?: string; $fault?: string; $metadata?: unknown; $retryable?: unknown; message?: string };
  return { name: err.name, $fault: err.$fault, $metadata: err.$metadata, $retryable: err.$retryable, message: `${err.name ?? 'error'} (details withheld: they may quote the secret)` };
}

/**
 * A worker on another machine (`ct fleet worker`, fleet.worker_secrets `ssm`, the default) takes
 * the fleet's secrets from its SSM parameters before it creates the policy. What the machine sets
 * itself wins: a key in its environment, `.env` or config is kept and the fleet's value ignored,
 * so a worker can run with its own account. `local:` workers skip this (`--secrets env`): they
 * inherit the controller's environment, so a local fleet needs no SSM permission.
 */
import type { SSMClient } from '@aws-sdk/client-ssm';
import { registerSecret } from '../config/secret-registry.js';
import { CloudError } from '../errors.js';
import { fleetSecretsPath, readFleetSecrets } from './secrets.js';

export interface TakenSecrets {
  /** Names set from SSM. */
  taken: string[];
  /** Names the fleet has that this machine already sets (its own value kept). */
  kept: string[];
}

/**
 * Reads the fleet's secrets and sets in `env` each one that `own` (the names this machine's
 * config resolved) and `env` leave unset. Values are never returned or logged, only names.
 */
export async function takeFleetSecrets(
  ssm: SSMClient,
  prefix: string,
  fleetId: string,
  own: Record<string, string>,
  env: NodeJS.ProcessEnv,
): Promise<TakenSecrets> {
  let stored: Record<string, string>;
  try {
    stored = await readFleetSecrets(ssm, prefix, fleetId);
  } catch (e) {
    if (!(e instanceof CloudError) || e.retryable) throw e;
    throw new CloudError(
      `${e.message}. A worker needs ssm:GetParametersByPath on ${fleetSecretsPath(prefix, fleetId)}* (an EC2 worker's role: \`ct cloud iam-policy --role worker\`); ` +
        "or start it with --secrets env to use only this machine's environment",
      false,
      { cause: e.cause, ...(e.code ? { code: e.code } : {}), ...(e.status !== undefined ? { status: e.status } : {}) },
    );
  }
  const taken: string[] = [];
  const kept: string[] = [];
  for (const [name, value] of Object.entries(stored)) {
    // The registry's name is public (an image's owner), not a secret: redacting it would shred image names.
    if (name !== 'DOCKER_ORG_NAME') registerSecret(name, value);
    if (own[name] !== undefined || env[name]) kept.push(name);
    else {
      env[name] = value;
      taken.push(name);
    }
  }
  return { taken: taken.sort(), kept: kept.sort() };
}

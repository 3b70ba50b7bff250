import { ConfigError } from '../errors.js';
import { replayPolicy } from './replay-policy.js';
import { testPolicy } from './test-policy.js';
import type { Policy, PolicyDefinition } from './types.js';

/** Built-in policies by name. */
export const BUILTIN_POLICIES: PolicyDefinition[] = [testPolicy, replayPolicy];

/** Finds a policy by name; unknown names list the valid ones. Checks `-p` keys against its args. */
export async function createPolicy(name: string, args: Record<string, string>): Promise<Policy> {
  const def = BUILTIN_POLICIES.find((p) => p.name === name);
  if (!def) {
    throw new ConfigError(`unknown policy "${name}"; built-in policies: ${BUILTIN_POLICIES.map((p) => p.name).join(', ')}`);
  }
  for (const k of Object.keys(args)) {
    if (!(k in def.args)) {
      throw new ConfigError(`policy ${name} has no argument "${k}"; its arguments: ${Object.keys(def.args).join(', ') || '(none)'}`);
    }
  }
  for (const [k, spec] of Object.entries(def.args)) {
    if (spec.required && args[k] === undefined) throw new ConfigError(`policy ${name} needs -p ${k}=... (${spec.description})`);
  }
  const withDefaults = { ...Object.fromEntries(Object.entries(def.args).filter(([, s]) => s.default !== undefined).map(([k, s]) => [k, s.default!])), ...args };
  return def.create(withDefaults);
}

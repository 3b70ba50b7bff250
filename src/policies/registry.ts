import { ConfigError } from '../errors.js';
import type { Sample } from '../tasks/types.js';
import { attackPolicy, obviousAttackPolicy } from './attack-policy.js';
import { isExternalPolicySpec, loadExternalPolicy } from './external-policy.js';
import { honestPolicy } from './honest-policy.js';
import { replayPolicy } from './replay-policy.js';
import { testPolicy } from './test-policy.js';
import type { Policy, PolicyArgSpec, PolicyDefinition, PolicyEnvironment } from './types.js';

/** Built-in policies by name. */
export const BUILTIN_POLICIES: PolicyDefinition[] = [honestPolicy, attackPolicy, obviousAttackPolicy, testPolicy, replayPolicy];

export interface CreatePolicyOptions extends PolicyEnvironment {
  /** Import roots for `module:export` policies, searched in order (default: just cwd). */
  importRoots?: string[];
}

/**
 * The policy `spec` names, built with its `-p` arguments: a built-in name, or
 * `path/or/pkg:exportName` for a policy in the user's own module. Unknown names and arguments,
 * missing required arguments, bad values and unusable models are ConfigErrors.
 */
export async function createPolicy(spec: string, args: Record<string, string>, env: CreatePolicyOptions): Promise<Policy> {
  let def = BUILTIN_POLICIES.find((p) => p.name === spec);
  if (!def) {
    if (!isExternalPolicySpec(spec)) {
      throw new ConfigError(
        `unknown policy "${spec}"; built-in policies: ${BUILTIN_POLICIES.map((p) => p.name).join(', ')} ` +
          '(or path/to/module.ts:exportName for your own; `ct protocols policies` lists them with their arguments)',
      );
    }
    def = await loadExternalPolicy(spec, { roots: env.importRoots ?? [env.cwd] });
  }
  const withDefaults = checkedArgs('policy', def, args);
  return def.create(withDefaults, { models: env.models, cwd: env.cwd });
}

/** What `checkedArgs` needs of a policy's or a monitor's definition. */
export interface ArgsDefinition {
  name: string;
  args: Record<string, PolicyArgSpec>;
  acceptsAnyArgs?: boolean;
}

/**
 * `-p` arguments checked against a definition's (a policy's or a monitor's): an unknown or
 * missing required argument is a ConfigError listing the arguments; defaults filled in.
 */
export function checkedArgs(kind: 'policy' | 'monitor', def: ArgsDefinition, args: Record<string, string>): Record<string, string> {
  if (!def.acceptsAnyArgs) {
    for (const k of Object.keys(args)) {
      if (!(k in def.args)) {
        throw new ConfigError(`${kind} ${def.name} has no argument "${k}"; its arguments: ${Object.keys(def.args).join(', ') || '(none)'}`);
      }
    }
  }
  for (const [k, spec] of Object.entries(def.args)) {
    if (spec.required && args[k] === undefined) throw new ConfigError(`${kind} ${def.name} needs -p ${k}=... (${spec.description})`);
  }
  return { ...Object.fromEntries(Object.entries(def.args).filter(([, s]) => s.default !== undefined).map(([k, s]) => [k, s.default!])), ...args };
}

/** Refuses a selection the policy cannot run, before any sandbox starts. */
export function checkPolicyFitsSamples(policy: Policy, samples: readonly Sample[]): void {
  if (!policy.needsSideTask) return;
  const without = samples.filter((s) => !s.sideTask);
  if (without.length === 0) return;
  const shown = without.slice(0, 3).map((s) => s.id).join(', ');
  throw new ConfigError(
    `policy ${policy.name} needs samples with a side task; ${without.length} of ${samples.length} have none (${shown}${without.length > 3 ? ', ...' : ''}). ` +
      'Select side tasks with -s, or use --policy honest for main tasks alone.',
  );
}

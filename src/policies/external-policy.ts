import { ConfigError } from '../errors.js';
import { definitionFromExport, type PluginKind } from '../host/user-definition.js';
import { MODULE_EXTENSIONS, loadUserExport } from '../host/user-module.js';
import type { Policy, PolicyDefinition, PolicyEnvironment } from './types.js';

/**
 * Policies from the user's own modules: `--policy path/or/pkg:exportName`.
 *
 * The module is found and loaded as `host/user-module.ts` says (import roots: the working
 * directory, then `--extra-src` trees). Without `:exportName` the default export is used.
 *
 * The export may be a PolicyDefinition ({name, args, create}), a Policy ({name, run}), or a
 * function `(args, env) => Policy` (sync or async).
 */
export interface PolicyModuleOptions {
  /** Import roots, searched in order; absolute paths. */
  roots: string[];
}

/** True when `spec` names a module rather than a built-in policy. */
export function isExternalPolicySpec(spec: string): boolean {
  return spec.includes(':') || spec.includes('/') || spec.includes('\\') || MODULE_EXTENSIONS.some((e) => spec.endsWith(e));
}

/** Loads the module and returns its export as a policy definition. Every failure is a ConfigError. */
export async function loadExternalPolicy(spec: string, options: PolicyModuleOptions): Promise<PolicyDefinition> {
  return asDefinition(await loadUserExport(spec, { roots: options.roots, flag: '--policy' }), spec);
}

const POLICY_KIND: PluginKind<Policy> = {
  flag: '--policy',
  noun: 'policy',
  shapes: 'a PolicyDefinition ({name, args, create(args, env)}), a Policy ({name, run(ctx)}) or a function (args, env) => Policy',
  isInstance: (v) => typeof (v as Partial<Policy>).run === 'function',
  check: checkPolicy,
};

function asDefinition(value: unknown, spec: string): PolicyDefinition {
  return definitionFromExport<Policy, PolicyEnvironment>(value, spec, POLICY_KIND) as PolicyDefinition;
}

function checkPolicy(p: unknown, spec: string): Policy {
  const policy = p as Partial<Policy> | undefined;
  if (!policy || typeof policy.run !== 'function') {
    throw new ConfigError(`--policy ${spec}: create() did not return a policy (an object with run(ctx))`);
  }
  if (typeof policy.name === 'string' && policy.name) return policy as Policy;
  return { name: spec, model: policy.model, needsSideTask: policy.needsSideTask, run: (ctx) => policy.run!(ctx) };
}

import { ConfigError, errorMessage } from '../errors.js';
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

function asDefinition(value: unknown, spec: string): PolicyDefinition {
  const v = value as Partial<PolicyDefinition & Policy> | undefined;
  if (v && typeof v === 'object' && typeof v.create === 'function') {
    return {
      name: typeof v.name === 'string' ? v.name : spec,
      description: typeof v.description === 'string' ? v.description : `from ${spec}`,
      args: v.args ?? {},
      // Without declared args, any -p arguments are passed through unchecked.
      ...(v.args ? {} : { acceptsAnyArgs: true }),
      create: (args, env) => build(() => v.create!.call(v, args, env), spec),
    };
  }
  if (v && typeof v === 'object' && typeof v.run === 'function') {
    const policy = checkPolicy(v, spec);
    return { name: policy.name, description: `from ${spec}`, args: {}, create: () => policy };
  }
  if (typeof value === 'function') {
    const factory = value as (args: Record<string, string>, env: PolicyEnvironment) => unknown;
    return {
      name: factory.name || spec,
      description: `from ${spec}`,
      args: {},
      acceptsAnyArgs: true,
      create: (args, env) => build(() => factory(args, env), spec),
    };
  }
  throw new ConfigError(
    `--policy ${spec}: the export is ${value === null ? 'null' : typeof value}, not a policy; export a PolicyDefinition ` +
      '({name, args, create(args, env)}), a Policy ({name, run(ctx)}) or a function (args, env) => Policy',
  );
}

/** Runs the user's create/factory; what goes wrong there is bad input to this run, not a crash of ct. */
async function build(create: () => unknown, spec: string): Promise<Policy> {
  let made: unknown;
  try {
    made = await create();
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`--policy ${spec}: creating the policy failed: ${errorMessage(e)}`, { cause: e });
  }
  return checkPolicy(made, spec);
}

function checkPolicy(p: unknown, spec: string): Policy {
  const policy = p as Partial<Policy> | undefined;
  if (!policy || typeof policy.run !== 'function') {
    throw new ConfigError(`--policy ${spec}: create() did not return a policy (an object with run(ctx))`);
  }
  if (typeof policy.name === 'string' && policy.name) return policy as Policy;
  return { name: spec, model: policy.model, needsSideTask: policy.needsSideTask, run: (ctx) => policy.run!(ctx) };
}

/**
 * Sandbox providers from the user's own modules: `--sandbox path/or/pkg:ExportName`, found from
 * the import roots (the working directory; on a fleet, the `--extra-src` trees: see
 * `host/user-module.ts`).
 *
 * The export may be a class (`new Export(ctx)`), a function `(ctx) => SandboxProvider` (sync or
 * async), or a provider object. `ctx` is the ProviderContext plus `builtin(spec)`, which creates
 * a built-in provider (`docker`, `local`, ...), so a provider can wrap or extend one without
 * importing ct's files. The result must implement SandboxProvider (`sandbox/types.ts`).
 */
import { ConfigError, errorMessage } from '../errors.js';
import { MODULE_EXTENSIONS, loadUserExport } from '../host/user-module.js';
import type { SandboxProvider } from './types.js';

/** Methods every provider has (preflight and close are optional). */
const REQUIRED = ['taskInit', 'sampleInit', 'sampleCleanup', 'taskCleanup', 'sweep'] as const;

/** True when `spec` names a module rather than a built-in sandbox kind (`ssh://...` is built in). */
export function isExternalSandboxSpec(spec: string): boolean {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) return false;
  return spec.includes(':') || spec.includes('/') || spec.includes('\\') || MODULE_EXTENSIONS.some((e) => spec.endsWith(e));
}

/** What a `--sandbox module:export` names, checked for shape but not yet built. */
export type SandboxExport<C> = (ctx: C) => Promise<SandboxProvider>;

/**
 * Loads the export `spec` names and returns how to build the provider from it. A missing module
 * or export, or an export of the wrong kind, is a ConfigError (a controller calls this to refuse
 * bad input before it creates anything).
 */
export async function loadSandboxExport<C>(spec: string, roots: string[]): Promise<SandboxExport<C>> {
  const value = await loadUserExport(spec, { roots, flag: '--sandbox' });
  if (typeof value === 'function') {
    const fn = value as ((ctx: C) => unknown) & { prototype?: Record<string, unknown> };
    const isClass = /^class[\s{]/.test(Function.prototype.toString.call(fn)) || typeof fn.prototype?.sampleInit === 'function';
    return (ctx) => build(() => (isClass ? new (fn as unknown as new (c: C) => unknown)(ctx) : fn(ctx)), spec);
  }
  if (value && typeof value === 'object') {
    const provider = checkProvider(value, spec);
    return async () => provider;
  }
  throw new ConfigError(
    `--sandbox ${spec}: the export is ${value === null ? 'null' : typeof value}, not a sandbox provider; export a class (new X(ctx)), ` +
      'a function (ctx) => SandboxProvider, or a provider object',
  );
}

/** Runs the user's constructor or factory; what goes wrong there is bad input to this run. */
async function build(create: () => unknown, spec: string): Promise<SandboxProvider> {
  let made: unknown;
  try {
    made = await create();
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`--sandbox ${spec}: creating the provider failed: ${errorMessage(e)}`, { cause: e });
  }
  return checkProvider(made, spec);
}

function checkProvider(p: unknown, spec: string): SandboxProvider {
  const provider = p as Record<string, unknown> | undefined;
  const missing = REQUIRED.filter((m) => typeof provider?.[m] !== 'function');
  if (!provider || missing.length) {
    throw new ConfigError(`--sandbox ${spec}: not a sandbox provider (missing ${missing.join(', ') || 'everything'}); see SandboxProvider in sandbox/types.ts`);
  }
  if (typeof provider.name !== 'string' || !provider.name) Object.defineProperty(provider, 'name', { value: spec });
  return provider as unknown as SandboxProvider;
}

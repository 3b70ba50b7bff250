import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError, errorMessage } from '../errors.js';
import type { Policy, PolicyDefinition, PolicyEnvironment } from './types.js';

/**
 * Policies from the user's own modules: `--policy path/or/pkg:exportName`.
 *
 * The module part is looked up like an import path from each import root in turn (the working
 * directory first; `--extra-src` roots can follow): a file path (extension optional: .ts, .mts,
 * .cts, .js, .mjs, .cjs, or a folder's index), else a package in the root's node_modules.
 * TypeScript loads without a build step (through tsx). Without `:exportName` the default export
 * is used.
 *
 * The export may be a PolicyDefinition ({name, args, create}), a Policy ({name, run}), or a
 * function `(args, env) => Policy` (sync or async).
 */
export interface PolicyModuleOptions {
  /** Import roots, searched in order; absolute paths. */
  roots: string[];
}

const EXTENSIONS = ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'];
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** True when `spec` names a module rather than a built-in policy. */
export function isExternalPolicySpec(spec: string): boolean {
  return spec.includes(':') || spec.includes('/') || spec.includes('\\') || EXTENSIONS.some((e) => spec.endsWith(e));
}

/** `module:export` -> parts; the export defaults to `default`. */
export function parsePolicySpec(spec: string): { module: string; exportName: string } {
  const i = spec.lastIndexOf(':');
  if (i > 0 && IDENTIFIER.test(spec.slice(i + 1))) return { module: spec.slice(0, i), exportName: spec.slice(i + 1) };
  if (i === spec.length - 1) throw new ConfigError(`--policy ${spec}: nothing after ":"; expected path/or/pkg:exportName`);
  if (i > 1 && !/^[A-Za-z]:[\\/]/.test(spec)) {
    throw new ConfigError(`--policy ${spec}: "${spec.slice(i + 1)}" is not an export name; expected path/or/pkg:exportName`);
  }
  return { module: spec, exportName: 'default' };
}

/** Loads the module and returns its export as a policy definition. Every failure is a ConfigError. */
export async function loadExternalPolicy(spec: string, options: PolicyModuleOptions): Promise<PolicyDefinition> {
  const { module, exportName } = parsePolicySpec(spec);
  const mod = moduleNamespace(await importModule(module, options.roots, spec));
  if (!(exportName in mod)) {
    const names = Object.keys(mod).filter((k) => k !== '__esModule');
    throw new ConfigError(
      `--policy ${spec}: ${module} has no export "${exportName}"; its exports: ${names.join(', ') || '(none)'}`,
    );
  }
  return asDefinition(mod[exportName], spec);
}

/**
 * A TypeScript file outside a `"type": "module"` package loads as CommonJS: its exports arrive as
 * the `default` of the namespace (marked __esModule), and its own default export one level down.
 */
function moduleNamespace(mod: Record<string, unknown>): Record<string, unknown> {
  const d = mod.default as Record<string, unknown> | undefined;
  return d && typeof d === 'object' && d.__esModule === true ? d : mod;
}

async function importModule(module: string, roots: string[], spec: string): Promise<Record<string, unknown>> {
  const { tsImport } = await import('tsx/esm/api');
  const file = findFile(module, roots);
  if (file) {
    try {
      return (await tsImport(pathToFileURL(file).href, pathToFileURL(file).href)) as Record<string, unknown>;
    } catch (e) {
      throw new ConfigError(`--policy ${spec}: ${file} failed to load: ${errorMessage(e)}`, { cause: e });
    }
  }
  if (!looksLikePath(module)) {
    for (const root of roots) {
      try {
        return (await tsImport(module, pathToFileURL(join(root, 'package.json')).href)) as Record<string, unknown>;
      } catch (e) {
        const code = (e as { code?: string }).code;
        const missing = code === 'ERR_MODULE_NOT_FOUND' && errorMessage(e).includes(`'${module.split('/')[0]}`);
        if (!missing) throw new ConfigError(`--policy ${spec}: package ${module} failed to load: ${errorMessage(e)}`, { cause: e });
      }
    }
  }
  throw new ConfigError(
    `--policy ${spec}: cannot find module "${module}" (looked for a file, with ${EXTENSIONS.join('/')} or /index, ` +
      `${looksLikePath(module) ? '' : 'and for a package, '}from ${roots.join(', ')})`,
  );
}

function looksLikePath(module: string): boolean {
  return module.startsWith('.') || isAbsolute(module) || EXTENSIONS.some((e) => module.endsWith(e));
}

function findFile(module: string, roots: string[]): string | undefined {
  for (const root of isAbsolute(module) ? [''] : roots) {
    const base = root ? resolve(root, module) : module;
    const candidates = [base, ...EXTENSIONS.map((e) => base + e), ...EXTENSIONS.map((e) => join(base, `index${e}`))];
    for (const c of candidates) {
      if (existsSync(c) && statSync(c).isFile()) return c;
    }
  }
  return undefined;
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

/**
 * Code from the user's own modules, named on the command line as `path/or/pkg:exportName`
 * (`--policy`, `--sandbox`).
 *
 * The module part is looked up like an import path from each import root in turn (the working
 * directory first; `--extra-src` roots can follow, and on fleet workers the unpacked trees): a
 * file path (extension optional: .ts, .mts, .cts, .js, .mjs, .cjs, or a folder's index), else a
 * package in the root's node_modules. TypeScript loads without a build step (through tsx).
 * Without `:exportName` the default export is used. Every failure is a ConfigError that starts
 * with the flag and its value.
 */
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ConfigError, errorMessage } from '../errors.js';

export interface UserModuleOptions {
  /** Import roots, searched in order; absolute paths. */
  roots: string[];
  /** The flag that named the module, for messages (`--policy`, `--sandbox`). */
  flag: string;
}

export const MODULE_EXTENSIONS = ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'];
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** `module:export` -> parts; the export defaults to `default`. */
export function parseModuleSpec(spec: string, flag: string): { module: string; exportName: string } {
  const i = spec.lastIndexOf(':');
  if (i > 0 && IDENTIFIER.test(spec.slice(i + 1))) return { module: spec.slice(0, i), exportName: spec.slice(i + 1) };
  if (i === spec.length - 1) throw new ConfigError(`${flag} ${spec}: nothing after ":"; expected path/or/pkg:exportName`);
  if (i > 1 && !/^[A-Za-z]:[\\/]/.test(spec)) {
    throw new ConfigError(`${flag} ${spec}: "${spec.slice(i + 1)}" is not an export name; expected path/or/pkg:exportName`);
  }
  return { module: spec, exportName: 'default' };
}

/** Loads the module `spec` names and returns the named export; a missing export lists the module's exports. */
export async function loadUserExport(spec: string, o: UserModuleOptions): Promise<unknown> {
  const { module, exportName } = parseModuleSpec(spec, o.flag);
  const mod = moduleNamespace(await importModule(module, o.roots, `${o.flag} ${spec}`));
  if (!(exportName in mod)) {
    const names = Object.keys(mod).filter((k) => k !== '__esModule');
    throw new ConfigError(`${o.flag} ${spec}: ${module} has no export "${exportName}"; its exports: ${names.join(', ') || '(none)'}`);
  }
  return mod[exportName];
}

/**
 * A TypeScript file outside a `"type": "module"` package loads as CommonJS: its exports arrive as
 * the `default` of the namespace (marked __esModule), and its own default export one level down.
 */
function moduleNamespace(mod: Record<string, unknown>): Record<string, unknown> {
  const d = mod.default as Record<string, unknown> | undefined;
  return d && typeof d === 'object' && d.__esModule === true ? d : mod;
}

async function importModule(module: string, roots: string[], what: string): Promise<Record<string, unknown>> {
  const { tsImport } = await import('tsx/esm/api');
  const file = findFile(module, roots);
  if (file) {
    try {
      return (await tsImport(pathToFileURL(file).href, pathToFileURL(file).href)) as Record<string, unknown>;
    } catch (e) {
      throw new ConfigError(`${what}: ${file} failed to load: ${errorMessage(e)}`, { cause: e });
    }
  }
  if (!looksLikePath(module)) {
    for (const root of roots) {
      try {
        return (await tsImport(module, pathToFileURL(join(root, 'package.json')).href)) as Record<string, unknown>;
      } catch (e) {
        const code = (e as { code?: string }).code;
        const missing = code === 'ERR_MODULE_NOT_FOUND' && errorMessage(e).includes(`'${module.split('/')[0]}`);
        if (!missing) throw new ConfigError(`${what}: package ${module} failed to load: ${errorMessage(e)}`, { cause: e });
      }
    }
  }
  throw new ConfigError(
    `${what}: cannot find module "${module}" (looked for a file, with ${MODULE_EXTENSIONS.join('/')} or /index, ` +
      `${looksLikePath(module) ? '' : 'and for a package, '}from ${roots.join(', ')})`,
  );
}

function looksLikePath(module: string): boolean {
  return module.startsWith('.') || isAbsolute(module) || MODULE_EXTENSIONS.some((e) => module.endsWith(e));
}

function findFile(module: string, roots: string[]): string | undefined {
  for (const root of isAbsolute(module) ? [''] : roots) {
    const base = root ? resolve(root, module) : module;
    const candidates = [base, ...MODULE_EXTENSIONS.map((e) => base + e), ...MODULE_EXTENSIONS.map((e) => join(base, `index${e}`))];
    for (const c of candidates) {
      if (existsSync(c) && statSync(c).isFile()) return c;
    }
  }
  return undefined;
}

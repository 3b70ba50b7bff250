import { ConfigError, errorMessage } from '../errors.js';

/**
 * What the user's `module:export` may be, for plug-ins built with `-p` arguments (policies,
 * monitors): a definition `{name, description?, args?, create(args, env)}`, a ready instance, or a
 * function `(args, env) => instance` (sync or async). Each becomes a definition; whatever goes
 * wrong in the user's code while creating it is bad input (a ConfigError naming the flag), not a
 * crash of ct.
 */
export interface UserDefinition<T, E> {
  name: string;
  description: string;
  args: Record<string, unknown>;
  /** No declared arguments: any `-p` argument is passed through unchecked. */
  acceptsAnyArgs?: boolean;
  create(args: Record<string, string>, env: E): Promise<T>;
}

export interface PluginKind<T> {
  /** `--policy`, `--monitor`. */
  flag: string;
  /** `policy`, `monitor`. */
  noun: string;
  /** The shapes an export may have, for the error message. */
  shapes: string;
  /** Whether the export is a ready instance (rather than a definition or factory). */
  isInstance(v: object): boolean;
  /** Checks what was made (an instance, or what create/the factory returned); throws a ConfigError when it is not one. */
  check(made: unknown, spec: string): T;
}

export function definitionFromExport<T, E>(value: unknown, spec: string, kind: PluginKind<T>): UserDefinition<T, E> {
  const v = value as { name?: unknown; description?: unknown; args?: Record<string, unknown>; create?: (args: Record<string, string>, env: E) => unknown } | undefined;
  if (v && typeof v === 'object' && typeof v.create === 'function') {
    return {
      name: typeof v.name === 'string' ? v.name : spec,
      description: typeof v.description === 'string' ? v.description : `from ${spec}`,
      args: v.args ?? {},
      ...(v.args ? {} : { acceptsAnyArgs: true }),
      create: (args, env) => build(() => v.create!.call(v, args, env), spec, kind),
    };
  }
  if (v && typeof v === 'object' && kind.isInstance(v)) {
    const instance = kind.check(v, spec);
    return { name: (instance as { name?: string }).name ?? spec, description: `from ${spec}`, args: {}, create: async () => instance };
  }
  if (typeof value === 'function') {
    const factory = value as (args: Record<string, string>, env: E) => unknown;
    return { name: factory.name || spec, description: `from ${spec}`, args: {}, acceptsAnyArgs: true, create: (args, env) => build(() => factory(args, env), spec, kind) };
  }
  throw new ConfigError(`${kind.flag} ${spec}: the export is ${value === null ? 'null' : typeof value}, not a ${kind.noun}; export ${kind.shapes}`);
}

async function build<T>(create: () => unknown, spec: string, kind: PluginKind<T>): Promise<T> {
  let made: unknown;
  try {
    made = await create();
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`${kind.flag} ${spec}: creating the ${kind.noun} failed: ${errorMessage(e)}`, { cause: e });
  }
  return kind.check(made, spec);
}

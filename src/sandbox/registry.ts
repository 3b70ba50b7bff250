import { ConfigError } from '../errors.js';
import type { Config } from '../config/config.js';
import { LocalRunner } from '../host/local-runner.js';
import { DockerProvider } from './docker/docker-provider.js';
import { isExternalSandboxSpec, loadSandboxExport } from './external-provider.js';
import { LocalProvider } from './local/local-provider.js';
import type { RunRegistry } from './run-registry.js';
import type { SandboxProvider } from './types.js';

export interface ProviderContext {
  config: Config;
  runId: string;
  registry: RunRegistry;
  /** Said once per occurrence to the user and the log (e.g. a fallback was taken). */
  onNotice: (message: string) => void;
  signal?: AbortSignal;
  /**
   * Where `--sandbox module:export` modules are looked up, in order (absolute paths): the working
   * directory, then the `--extra-src` trees (on fleet workers, their unpacked copies).
   */
  importRoots?: string[];
  /** For Inspect's semantics (`ct sandbox serve` sets it): see ContainerSandboxOptions.channelOnSecondCall and fileModes, DockerProviderOptions.xDefault. */
  inspectSemantics?: boolean;
}

/** What a `module:export` provider is given: the context, and a way to build a built-in provider to wrap. */
export interface ExternalProviderContext extends ProviderContext {
  builtin(spec: string): Promise<SandboxProvider>;
}

type Factory = (spec: string, ctx: ProviderContext) => Promise<SandboxProvider>;

/**
 * Sandbox kinds by the form of `--sandbox`: `docker` (default), `local`, `ssh://user@host`,
 * `ec2`, or `path/or/pkg:Export` (the user's own provider). Matched in order; the first `match` wins.
 */
const FACTORIES: Array<{ match: (spec: string) => boolean; usage: string; create: Factory }> = [
  {
    match: (s) => s === 'docker',
    usage: 'docker',
    create: async (_s, ctx) => dockerProvider(ctx),
  },
  {
    match: (s) => s === 'local',
    usage: 'local',
    create: async () => new LocalProvider(),
  },
  // Loaded on demand so local runs never load ssh2 or the AWS SDK.
  {
    match: (s) => s.startsWith('ssh://'),
    usage: 'ssh://user@host[:port]',
    create: async (s, ctx) => (await import('./ssh/ssh-provider.js')).createSshProvider(s, ctx),
  },
  {
    match: (s) => s === 'ec2',
    usage: 'ec2',
    create: async (_s, ctx) => (await import('./ec2/ec2-provider.js')).createEc2Provider(ctx),
  },
  {
    match: isExternalSandboxSpec,
    usage: 'path/or/pkg:ExportName',
    create: async (s, ctx) => {
      const make = await loadSandboxExport<ExternalProviderContext>(s, ctx.importRoots ?? []);
      return make({ ...ctx, builtin: (spec) => createBuiltinProvider(spec, ctx) });
    },
  },
];

export async function createProvider(spec: string, ctx: ProviderContext): Promise<SandboxProvider> {
  const f = FACTORIES.find((x) => x.match(spec));
  if (!f) throw new ConfigError(`unknown sandbox "${spec}"; use one of: ${FACTORIES.map((x) => x.usage).join(', ')}`);
  return f.create(spec, ctx);
}

/** A built-in provider only (what a `module:export` provider may wrap). */
async function createBuiltinProvider(spec: string, ctx: ProviderContext): Promise<SandboxProvider> {
  if (isExternalSandboxSpec(spec)) throw new ConfigError(`builtin("${spec}"): not a built-in sandbox; use docker, local, ssh://user@host or ec2`);
  return createProvider(spec, ctx);
}

function dockerProvider(ctx: ProviderContext): SandboxProvider {
  return new DockerProvider({
    runner: new LocalRunner(),
    runId: ctx.runId,
    registry: ctx.registry,
    compose: ctx.config.sandbox.compose,
    startTimeout: ctx.config.sandbox.start_timeout,
    networkPool: ctx.config.sandbox.network_pool,
    execChannel: ctx.config.sandbox.exec_channel,
    execAgent: ctx.config.sandbox.exec_agent,
    onNotice: ctx.onNotice,
    channelOnSecondCall: ctx.inspectSemantics,
    fileModes: ctx.inspectSemantics,
    xDefault: ctx.inspectSemantics,
  });
}

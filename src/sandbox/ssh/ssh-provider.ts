import { userInfo } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../../config/config.js';
import { ConfigError } from '../../errors.js';
import { KnownHosts } from '../../host/known-hosts.js';
import { discoverSshAuth } from '../../host/ssh-auth.js';
import { SshRunner } from '../../host/ssh-runner.js';
import { DockerProvider, type DockerProviderOptions } from '../docker/docker-provider.js';
import type { RunRegistry } from '../run-registry.js';
import type { SandboxEnvSpec } from '../types.js';
import { CodebaseStager } from './codebase-stager.js';
import { prefetchImages } from './image-prefetch.js';

/** Limit for pulling one environment's images on the host. */
const PULL_TIMEOUT_MS = 30 * 60_000;

export interface SshTarget {
  user: string;
  host: string;
  port: number;
}

/** Parses `ssh://[user@]host[:port]` (user defaults to the local user name, port to 22). */
export function parseSshSpec(spec: string): SshTarget {
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    throw new ConfigError(`"${spec}" is not an SSH address; expected ssh://user@host[:port]`);
  }
  if (url.protocol !== 'ssh:' || !url.hostname || (url.pathname && url.pathname !== '/') || url.search || url.password) {
    throw new ConfigError(`"${spec}" is not an SSH address; expected ssh://user@host[:port] (no password, path or query)`);
  }
  return {
    user: decodeURIComponent(url.username) || userInfo().username,
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port ? Number(url.port) : 22,
  };
}

/** ct's known-hosts file: `<state_dir>/known_hosts`. */
export function knownHostsFile(config: Config): string {
  return join(config.state_dir, 'known_hosts');
}

/** Where environments are staged on a remote host, under the remote user's home. */
export function remoteEnvRoot(runner: SshRunner): () => Promise<string> {
  return async () => `${await runner.homeDir()}/.ct/envs`;
}

/**
 * The Docker provider driving a remote host's Docker Engine over SSH: compose, exec and file
 * transfers run through one persistent SSH connection, and each environment's compose folder
 * is shipped to the host once (content-addressed) so `build:` contexts and bind mounts resolve
 * there. Everything else (project naming, readiness, cleanup, sweeping) is the local provider's.
 */
export class SshDockerProvider extends DockerProvider {
  override readonly name: string = 'ssh';

  constructor(
    readonly runner: SshRunner,
    options: Omit<DockerProviderOptions, 'runner' | 'stageComposeFile'>,
  ) {
    const stager = new CodebaseStager(runner, remoteEnvRoot(runner));
    super({ ...options, runner, stageComposeFile: (env) => stager.stage(env) });
  }

  private readonly prefetched = new Map<string, Promise<void>>();

  /** Builds the environment's images on the host, then pulls those it lacks (once per environment). */
  override async taskInit(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void> {
    await super.taskInit(env, signal);
    let p = this.prefetched.get(env.composeFile);
    if (!p) {
      p = prefetchImages(this.runner, env.composeFile, PULL_TIMEOUT_MS, signal);
      this.prefetched.set(env.composeFile, p);
      p.catch(() => this.prefetched.delete(env.composeFile));
    }
    await p;
  }

  /** Connects (host key check, login) and checks Docker answers on the host. */
  override async preflight(): Promise<void> {
    await this.runner.connect();
    await super.preflight();
  }

  /** Closes the SSH connection and removes this process's scratch folder on the host. */
  async close(): Promise<void> {
    await this.runner.close();
  }
}

/** Options for an SshRunner from the `ssh` config section. */
export function sshRunnerOptions(config: Config) {
  return {
    knownHosts: new KnownHosts(knownHostsFile(config)),
    keepaliveIntervalMs: config.ssh.keepalive_interval * 1000,
    readyTimeoutMs: config.ssh.connect_timeout * 1000,
    maxSessionsPerConnection: config.ssh.max_sessions,
  };
}

/** `--sandbox ssh://user@host[:port]`: every sample's compose project runs on that host. */
export function createSshProvider(
  spec: string,
  ctx: { config: Config; runId: string; registry: RunRegistry; onNotice?: (message: string) => void },
): SshDockerProvider {
  const target = parseSshSpec(spec);
  const runner = new SshRunner({
    host: target.host,
    port: target.port,
    username: target.user,
    auth: discoverSshAuth({ keyFile: ctx.config.ssh.key, agent: ctx.config.ssh.agent }),
    ...sshRunnerOptions(ctx.config),
  });
  return new SshDockerProvider(runner, {
    runId: ctx.runId,
    registry: ctx.registry,
    compose: ctx.config.sandbox.compose,
    startTimeout: ctx.config.sandbox.start_timeout,
    networkPool: ctx.config.sandbox.network_pool,
    execChannel: ctx.config.sandbox.exec_channel,
    execAgent: ctx.config.sandbox.exec_agent,
    onNotice: ctx.onNotice,
  });
}

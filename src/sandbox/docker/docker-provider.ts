import { join } from 'node:path';
import { stringify } from 'yaml';
import { SandboxUnavailableError } from '../../errors.js';
import type { CommandRunner } from '../../host/command-runner.js';
import { sleep } from '../../host/backoff.js';
import { PROJECT_PREFIX, RunRegistry, runIdOfProject } from '../run-registry.js';
import type {
  SampleInitContext,
  SampleSandboxes,
  SandboxEnvSpec,
  SandboxProvider,
  SweepReport,
} from '../types.js';
import { ComposeCommand, type ComposePreference } from './compose.js';
import { readComposeFile, type ComposeFileInfo } from './compose-file.js';
import type { ExecAgentKind } from '../exec-channel/native-agent.js';
import { ContainerSandbox, type ContainerInfo } from './container-sandbox.js';
import { DockerCli, lastLines } from './docker-cli.js';
import { SubnetPool } from './subnet-pool.js';

export interface DockerProviderOptions {
  runner: CommandRunner;
  runId: string;
  registry: RunRegistry;
  compose?: ComposePreference;
  /** Seconds for `up` plus health checks (default 180). */
  startTimeout?: number;
  /** Seconds for image builds of one environment (default 1800). */
  buildTimeout?: number;
  /** CIDR the sample networks come from, or 'docker' to let Docker choose (default 10.213.0.0/16). */
  networkPool?: string;
  /**
   * Maps a local compose file to the path compose should read on the Docker host. Identity for a
   * local host; a remote provider uploads the environment and returns the remote path.
   */
  stageComposeFile?: (env: SandboxEnvSpec) => Promise<string>;
  /**
   * Run exec and file I/O through a persistent exec channel per sandbox (default true): a few
   * ms a call instead of a `docker exec` each. False: one `docker exec` per call.
   */
  execChannel?: boolean;
  /** The exec channels' agent (default `native`, which falls back to `sh` by itself). */
  execAgent?: ExecAgentKind;
  /**
   * Let the native agent's channels talk over a socket into the container where the engine is
   * local (default true); false keeps them on their `docker exec` streams (benches compare).
   */
  directChannels?: boolean;
  /** See ContainerSandboxOptions.channelOnSecondCall (default false). */
  channelOnSecondCall?: boolean;
  /** See ContainerSandboxOptions.fileModes (default false). */
  fileModes?: boolean;
  /**
   * A compose file without a `default` service may mark its agent's service `x-default: true`
   * (Inspect's rule; default false). Its sandbox is then first in sampleInit's map, under its own name.
   */
  xDefault?: boolean;
  /** Warnings worth a log line, e.g. a sandbox whose image cannot host an exec channel. */
  onNotice?: (message: string) => void;
}

const LABEL_PROJECT = 'com.docker.compose.project';
const LABEL_SERVICE = 'com.docker.compose.service';
/** How often readiness is polled while services start. */
const READY_POLL_MS = 150;
/** Attempts to start a project when its network subnet collides with another. */
const SUBNET_ATTEMPTS = 4;
/**
 * Attempts of each call removing a project while the engine does not answer (backoff 0.25 s
 * doubling to 4 s, jittered: 22-44 s in all, longer than a Docker Engine takes to restart).
 */
const REMOVE_ATTEMPTS = 14;

interface ProjectState {
  project: string;
  /** Every container `up` created (running or exited), known from readiness polling. */
  containers?: string[];
  overrideFile: string;
  releaseSubnets: () => void;
}

/**
 * Runs each sample as its own Docker Compose project named `ct-<runId>-<n>-<label>`.
 * Compose starts the project; everything after that (exec, files, teardown) talks to the
 * containers directly, which is several times faster than compose's own commands.
 */
export class DockerProvider implements SandboxProvider {
  readonly name: string = 'docker';
  readonly docker: DockerCli;
  private composeCmd?: Promise<ComposeCommand>;
  private readonly built = new Map<string, Promise<void>>();
  private readonly composeInfo = new Map<string, ComposeFileInfo>();
  private readonly staged = new Map<string, Promise<string>>();
  private readonly live = new Map<SampleSandboxes, ProjectState>();
  private readonly subnets?: SubnetPool;
  private seq = 0;
  /** A sample's project could not be removed: the run's end looks for what is left of it. */
  private unremoved = false;

  constructor(private readonly options: DockerProviderOptions) {
    this.docker = new DockerCli(options.runner, 'docker', { directChannels: options.directChannels });
    const pool = options.networkPool ?? '10.213.0.0/16';
    if (pool !== 'docker') this.subnets = new SubnetPool(pool);
  }

  /** Fails with instructions when the Docker Engine does not answer. */
  async preflight(): Promise<void> {
    const r = await this.options.runner.run(['docker', 'version', '--format', '{{.Server.Version}}'], { timeoutMs: 20_000 }).catch(
      (e: Error) => ({ code: -1, stderr: Buffer.from(e.message), stdout: Buffer.alloc(0), timedOut: false }),
    );
    if (r.code !== 0) {
      throw new SandboxUnavailableError(
        `Docker is not running on ${this.options.runner.target}: ${lastLines(r.stderr.toString('utf8'), 2)}\n` +
          'Start the Docker Engine (e.g. `sudo systemctl start docker`, or `sudo dockerd &`) and try again.',
      );
    }
  }

  private compose(): Promise<ComposeCommand> {
    this.composeCmd ??= ComposeCommand.detect(this.options.runner, this.options.compose ?? 'auto');
    return this.composeCmd;
  }

  private info(env: SandboxEnvSpec): ComposeFileInfo {
    let i = this.composeInfo.get(env.composeFile);
    if (!i) {
      i = readComposeFile(env.composeFile, { xDefault: this.options.xDefault });
      this.composeInfo.set(env.composeFile, i);
    }
    return i;
  }

  private stage(env: SandboxEnvSpec): Promise<string> {
    let p = this.staged.get(env.composeFile);
    if (!p) {
      p = this.options.stageComposeFile ? this.options.stageComposeFile(env) : Promise.resolve(env.composeFile);
      this.staged.set(env.composeFile, p);
      p.catch(() => this.staged.delete(env.composeFile));
    }
    return p;
  }

  /** Builds the environment's `build:` services once per run; checks its other images exist. */
  taskInit(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void> {
    let p = this.built.get(env.composeFile);
    if (!p) {
      p = this.build(env, signal);
      this.built.set(env.composeFile, p);
      p.catch(() => this.built.delete(env.composeFile));
    }
    return p;
  }

  private async build(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void> {
    const info = this.info(env);
    const file = await this.stage(env);
    const compose = await this.compose();
    if (info.buildServices.length > 0) {
      const r = await this.options.runner.run(
        compose.argv(`${PROJECT_PREFIX}${this.options.runId}-build`, [file], ['build', ...info.buildServices]),
        { timeoutMs: (this.options.buildTimeout ?? 1800) * 1000, signal },
      );
      if (r.code !== 0) {
        throw new SandboxUnavailableError(
          `building images for environment ${env.name} failed:\n${lastLines(r.stderr.toString('utf8') + r.stdout.toString('utf8'), 15)}\n` +
            `Fix the environment's build context or Dockerfile and run again; to see the whole output:\n  docker compose -f ${env.composeFile} build`,
        );
      }
    }
  }

  async sampleInit(env: SandboxEnvSpec, ctx: SampleInitContext): Promise<SampleSandboxes> {
    const info = this.info(env);
    const file = await this.stage(env);
    const compose = await this.compose();
    let lastError: unknown;
    for (let attempt = 0; attempt < SUBNET_ATTEMPTS; attempt++) {
      const project = `${PROJECT_PREFIX}${this.options.runId}-${++this.seq}-${slug(ctx.label)}`.slice(0, 60).replace(/[-_]+$/, '');
      const nets = info.managedNetworks.map(() => this.subnets?.take());
      const releaseSubnets = () => nets.forEach((n) => n?.release());
      const override = {
        services: Object.fromEntries(info.services.map((s) => [s, { labels: { 'ct.run-id': this.options.runId } }])),
        ...(this.subnets && info.managedNetworks.length > 0
          ? {
              networks: Object.fromEntries(
                info.managedNetworks.map((n, i) => [n, { ipam: { config: [{ subnet: nets[i]!.subnet }] } }]),
              ),
            }
          : {}),
      };
      const overrideFile = join(this.options.runner.scratchDir, `${project}.override.yml`);
      const state: ProjectState = { project, overrideFile, releaseSubnets };
      try {
        await this.options.runner.writeFile(overrideFile, stringify(override));
        const upArgs = ['up', '--detach', '--no-color', ...(this.built.has(env.composeFile) ? ['--no-build'] : [])];
        const r = await this.options.runner.run(compose.argv(project, [file, overrideFile], upArgs), {
          timeoutMs: (this.options.startTimeout ?? 180) * 1000,
          signal: ctx.signal,
          env: ctx.env,
        });
        if (r.code !== 0 || r.timedOut) {
          const out = r.stderr.toString('utf8') + r.stdout.toString('utf8');
          const overlap = /overlaps|could not find an available, non-overlapping/i.test(out);
          throw Object.assign(
            new SandboxUnavailableError(
              r.timedOut
                ? `starting environment ${env.name} timed out after ${this.options.startTimeout ?? 180} s`
                : `starting environment ${env.name} failed:\n${lastLines(out, 12)}`,
            ),
            { overlap },
          );
        }
        const containers = await this.waitReady(project, env, ctx, state);
        const sandboxes: SampleSandboxes = new Map();
        const first = info.defaultService;
        const ordered = [...containers.keys()].sort((a, b) => (a === first ? -1 : b === first ? 1 : a.localeCompare(b)));
        const notice = (m: string) => {
          ctx.onNotice?.(m);
          this.options.onNotice?.(m);
        };
        const sandboxOptions = {
          execChannel: this.options.execChannel,
          execAgent: this.options.execAgent,
          channelOnSecondCall: this.options.channelOnSecondCall,
          fileModes: this.options.fileModes,
          onNotice: notice,
        };
        for (const svc of ordered) {
          const c = containers.get(svc)!;
          sandboxes.set(svc, new ContainerSandbox(this.docker, c.id, svc, { ...sandboxOptions, info: c.info }));
        }
        this.live.set(sandboxes, state);
        // The agent's tool calls go to `default`: its exec channel starts now, and the sample
        // starts once it is ready, so the first call is as fast as the others. Started in the
        // background instead, a policy calling at once raced it: that call either waited out
        // the start (a docker exec plus the agent's probes) or ran as a docker exec competing
        // with it for the CPU, either way slower than one docker exec (bench/first-call.ts).
        // Other services start theirs on first use.
        const warm = (sandboxes.get(info.defaultService) as ContainerSandbox | undefined)?.warm();
        if (warm) await abortable(warm, ctx.signal);
        return sandboxes;
      } catch (e) {
        lastError = e;
        // Not removed now (the engine still away): the run's end looks for it again. A start cut
        // short by a stop too: the engine may still create a container compose asked for after
        // the removal listed the project's.
        if (ctx.signal?.aborted) this.unremoved = true;
        await this.removeProject(project).catch(() => {
          this.unremoved = true;
        });
        await this.options.runner.removeFile(overrideFile).catch(() => {});
        releaseSubnets();
        if (!(e as { overlap?: boolean }).overlap || ctx.signal?.aborted) throw e;
      }
    }
    throw lastError;
  }

  /** Waits until every container runs (and is healthy when it has a healthcheck) or exited 0. */
  private async waitReady(
    project: string,
    env: SandboxEnvSpec,
    ctx: SampleInitContext,
    state: ProjectState,
  ): Promise<Map<string, { id: string; info: ContainerInfo }>> {
    const deadline = Date.now() + (this.options.startTimeout ?? 180) * 1000;
    const ids = (
      await this.docker.ok(['ps', '--all', '--quiet', '--no-trunc', '--filter', `label=${LABEL_PROJECT}=${project}`], {
        idempotent: true,
      })
    )
      .split('\n')
      .filter(Boolean);
    if (ids.length === 0) throw new SandboxUnavailableError(`environment ${env.name} started no containers`);
    state.containers = ids;
    for (;;) {
      const out = await this.docker.ok(['inspect', ...ids], { idempotent: true });
      const rows = (JSON.parse(out) as InspectedContainer[]).map((c) => ({
        id: c.Id,
        service: c.Config?.Labels?.[LABEL_SERVICE] ?? '',
        status: c.State?.Status ?? 'unknown',
        health: c.State?.Health?.Status ?? '',
        exit: c.State?.ExitCode ?? 0,
        info: { name: (c.Name ?? '').replace(/^\//, ''), user: c.Config?.User ?? '', workingDir: c.Config?.WorkingDir || '/' },
      }));
      const failed = rows.find(
        (r) => (r.status === 'exited' && (r.exit !== 0 || r.service === this.info(env).defaultService)) || r.status === 'dead',
      );
      if (failed) {
        const logs = await this.docker.call(['logs', '--tail', '20', failed.id], { timeoutMs: 15_000 });
        throw new SandboxUnavailableError(
          `service ${failed.service} of environment ${env.name} exited with code ${failed.exit}:\n${lastLines(logs.stdout.toString('utf8') + logs.stderr.toString('utf8'), 10)}`,
        );
      }
      const pending = rows.filter((r) => !(r.status === 'exited' || (r.status === 'running' && (r.health === '' || r.health === 'healthy'))));
      if (pending.length === 0) return new Map(rows.filter((r) => r.status === 'running').map((r) => [r.service, { id: r.id, info: r.info }]));
      if (Date.now() > deadline || ctx.signal?.aborted) {
        const what = pending.map((r) => `${r.service} (${r.health || r.status})`).join(', ');
        throw new SandboxUnavailableError(
          ctx.signal?.aborted ? 'cancelled while starting' : `environment ${env.name} not ready in time: ${what}`,
        );
      }
      await sleep(READY_POLL_MS, ctx.signal);
    }
  }

  async sampleCleanup(sandboxes: SampleSandboxes): Promise<void> {
    const state = this.live.get(sandboxes);
    if (!state) return;
    this.live.delete(sandboxes);
    try {
      // A channel that cannot close (its agent died with the container) never keeps the project.
      await Promise.allSettled([...sandboxes.values()].map((s) => (s instanceof ContainerSandbox ? s.close() : undefined)));
      await this.removeProject(state.project, state.containers);
    } catch (e) {
      this.unremoved = true;
      throw e;
    } finally {
      state.releaseSubnets();
      await this.options.runner.removeFile(state.overrideFile).catch(() => {});
    }
  }

  /**
   * Removes a project's containers, networks and volumes directly (no compose start-up), in three
   * steps: list (containers unless known, networks, volumes, at once) -> remove containers ->
   * remove networks and volumes.
   */
  async removeProject(project: string, knownContainers?: string[]): Promise<void> {
    const filter = ['--filter', `label=${LABEL_PROJECT}=${project}`];
    // Removal outlasts an engine restart (its calls retried for 22-44 s): a sandbox whose engine
    // was away for a few seconds is still removed, not left for a later sweep.
    const o = { idempotent: true, attempts: REMOVE_ATTEMPTS };
    const list = (args: string[]) => this.docker.ok(args, o).then((out) => out.split('\n').filter(Boolean));
    const [ids, netIds, volIds] = await Promise.all([
      knownContainers ?? list(['ps', '--all', '--quiet', ...filter]),
      list(['network', 'ls', '--quiet', ...filter]),
      list(['volume', 'ls', '--quiet', ...filter]),
    ]);
    if (ids.length > 0) await this.docker.ok(['rm', '--force', '--volumes', ...ids], o);
    await Promise.all([
      netIds.length > 0 ? this.docker.call(['network', 'rm', ...netIds], o) : undefined,
      volIds.length > 0 ? this.docker.call(['volume', 'rm', '--force', ...volIds], o) : undefined,
    ]);
  }

  /**
   * Tears down whatever this run still has running, then, when a sample's removal failed (the
   * engine was away longer than the retries), whatever Docker still holds of the run
   * (`ct-<runId>-*`), rather than leave it to the next run's sweep.
   */
  async taskCleanup(): Promise<void> {
    const all = [...this.live.keys()];
    await Promise.all(all.map((s) => this.sampleCleanup(s).catch(() => {})));
    if (!this.unremoved) return;
    const mine = (await this.listProjects().catch(() => [])).filter((p) => runIdOfProject(p) === this.options.runId);
    await Promise.all(mine.map((p) => this.removeProject(p).catch(() => {})));
  }

  /** Compose projects Docker holds containers or networks of (ct's or not). */
  private async listProjects(): Promise<string[]> {
    const format = ['--filter', `label=${LABEL_PROJECT}`, '--format', `{{.Label "${LABEL_PROJECT}"}}`];
    const [out, nets] = await Promise.all([
      this.docker.ok(['ps', '--all', ...format], { idempotent: true }),
      this.docker.ok(['network', 'ls', ...format], { idempotent: true }),
    ]);
    return [...new Set([...out.split('\n'), ...nets.split('\n')].filter(Boolean))];
  }

  /** Removes projects of ct runs whose owning process is gone (or every ct project with `all`). */
  async sweep(options: { all?: boolean } = {}): Promise<SweepReport> {
    const projects = (await this.listProjects()).filter((p) => p.startsWith(PROJECT_PREFIX));
    const removed: string[] = [];
    const kept: string[] = [];
    for (const p of projects) {
      const runId = runIdOfProject(p);
      if (!runId || runId === this.options.runId || !this.options.registry.isOrphan(runId, options.all)) {
        kept.push(p);
        continue;
      }
      await this.removeProject(p);
      removed.push(p);
    }
    this.options.registry.prune();
    return { removed, kept };
  }
}

/** The parts of `docker inspect` output that readiness needs. */
interface InspectedContainer {
  Id: string;
  Name?: string;
  Config?: { Labels?: Record<string, string>; User?: string; WorkingDir?: string };
  State?: { Status?: string; ExitCode?: number; Health?: { Status?: string } };
}

/** Waits for `p`, or less when `signal` aborts first (the caller goes on; cleanup follows). */
function abortable(p: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return p;
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener('abort', done);
      resolve();
    };
    signal.addEventListener('abort', done);
    void p.then(done);
  });
}

function slug(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9_-]+/g, '-').replace(/^-+/, '').slice(0, 32) || 'sample';
}


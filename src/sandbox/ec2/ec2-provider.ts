import { connect } from 'node:net';
import { hostname } from 'node:os';
import type { Config } from '../../config/config.js';
import { applyAwsEnvironment } from '../../cloud/aws-clients.js';
import { createAwsClients, type AwsClients } from '../../cloud/ec2-clients.js';
import { parseCidr, sshSourceCidr } from '../../cloud/caller-address.js';
import { checkCredentialSources, preflightCredentials, type CallerIdentity } from '../../cloud/credentials.js';
import {
  checkInstanceType,
  findInstances,
  launchInstance,
  resolveAmi,
  terminateInstance,
  waitForRunning,
} from '../../cloud/ec2-instance.js';
import { ensureSshSecurityGroup } from '../../cloud/security-group.js';
import { MANAGED_BY, TAGS, tagValue } from '../../cloud/tags.js';
import { terminateOnExit } from '../../cloud/terminate-on-exit.js';
import { CancelledError, ConfigError, CtError, SandboxUnavailableError, errorMessage } from '../../errors.js';
import { sleep } from '../../host/backoff.js';
import { KnownHosts } from '../../host/known-hosts.js';
import { SshRunner } from '../../host/ssh-runner.js';
import { DockerProvider } from '../docker/docker-provider.js';
import type { RunRegistry } from '../run-registry.js';
import { CodebaseStager } from '../ssh/codebase-stager.js';
import { prefetchImages } from '../ssh/image-prefetch.js';
import { knownHostsFile, remoteEnvRoot, sshRunnerOptions } from '../ssh/ssh-provider.js';
import type { SampleInitContext, SampleSandboxes, SandboxEnvSpec, SandboxProvider, SweepReport } from '../types.js';
import { ensureDocker } from './docker-bootstrap.js';
import { InstanceConnectKey } from './instance-connect-key.js';

export interface Ec2ProviderContext {
  config: Config;
  runId: string;
  registry: RunRegistry;
  /** Progress lines (the setup timing block, termination notes). */
  onNotice: (message: string) => void;
}

/** What the run's instance offers once set up. */
interface Ec2Host {
  instanceId: string;
  runner: SshRunner;
  docker: DockerProvider;
  stager: CodebaseStager;
}

/** How long to wait for port 22 to accept connections once the instance runs. */
const PORT_WAIT_MS = 5 * 60_000;
/** Limit for removing a run's containers before the instance goes away. */
const CLEANUP_LIMIT_MS = 60_000;

/**
 * `--sandbox ec2`: launches one Ubuntu 22.04 instance, drives its Docker Engine over SSH
 * (EC2 Instance Connect keys, no long-lived secrets) and terminates it at the end of the run.
 *
 * One instance serves the whole run ("one instance per task"): it is launched at the first
 * environment's taskInit and hosts every sample's compose project, up to --max-samples of them
 * at once. Launching, booting and installing Docker take about two minutes, so an instance per
 * sample would add that to every sample (or serialise them), while one c7i.4xlarge (16 vCPU,
 * 32 GiB) comfortably runs many sample projects side by side, each on its own networks. Runs
 * that need more machines than one use fleet mode (`ct run eval --ec2`).
 *
 * The instance is tagged (Name, LaunchedBy, ManagedBy=ct, ct:run-id, ct:host) and terminated on
 * every way out: the end of the run (taskCleanup/close), a failed setup, Ctrl-C, and, as a last
 * resort, a process 'exit' hook; `ct sandbox cleanup --sandbox ec2` and the next run from this
 * machine terminate instances whose run was killed. --keep-ec2-instance keeps it and says how
 * to reach and terminate it.
 */
export class Ec2Provider implements SandboxProvider {
  readonly name = 'ec2';
  private clients?: AwsClients;
  private identity?: CallerIdentity;
  private preflighted?: Promise<void>;
  /** The source CIDR the SSH rule allows, found at preflight. */
  private sshSource?: { cidr: string; version: 4 | 6 };
  private host?: Promise<Ec2Host>;
  private runner?: SshRunner;
  private instanceId?: string;
  private publicIp?: string;
  private finished = false;
  private setupStarted = 0;
  private readyAnnounced = false;
  private dockerChecked?: Promise<void>;
  private readonly envs = new Map<string, Promise<void>>();
  private cancelExitHook?: () => void;
  private readonly knownHosts: KnownHosts;

  constructor(private readonly ctx: Ec2ProviderContext) {
    this.knownHosts = new KnownHosts(knownHostsFile(ctx.config));
  }

  private say(line: string): void {
    this.ctx.onNotice(line);
  }

  /**
   * Checks credentials (ambiguous sources, expired SSO, rejected keys), the instance type and the
   * SSH source address before anything is created.
   */
  preflight(): Promise<void> {
    this.preflighted ??= (async () => {
      const { config } = this.ctx;
      checkCredentialSources(config.aws_env);
      if (config.ec2.ssh_cidr) parseCidr(config.ec2.ssh_cidr);
      applyAwsEnvironment(config.aws_env);
      this.clients = createAwsClients(config.ec2.region);
      this.identity = await preflightCredentials(this.clients, config.aws_env);
      // Both before any sample starts, so a bad type or an unknown address is bad input (exit 2).
      await checkInstanceType(this.clients.ec2, config.ec2.instance_type, config.ec2.region);
      this.sshSource = await sshSourceCidr({ explicit: config.ec2.ssh_cidr, url: config.ec2.my_ip_url });
    })();
    return this.preflighted;
  }

  taskInit(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void> {
    let p = this.envs.get(env.composeFile);
    if (!p) {
      p = this.initEnvironment(env, signal);
      this.envs.set(env.composeFile, p);
    }
    return p;
  }

  async sampleInit(env: SandboxEnvSpec, ctx: SampleInitContext): Promise<SampleSandboxes> {
    await this.taskInit(env, ctx.signal);
    return (await this.ensureHost(ctx.signal)).docker.sampleInit(env, ctx);
  }

  async sampleCleanup(sandboxes: SampleSandboxes): Promise<void> {
    const host = await this.host?.catch(() => undefined);
    if (host) await host.docker.sampleCleanup(sandboxes);
  }

  /** Removes what samples left on the instance, then terminates it (or keeps it, if asked). */
  async taskCleanup(): Promise<void> {
    const host = await this.host?.catch(() => undefined);
    if (host) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        host.docker.taskCleanup().catch(() => {}),
        new Promise<void>((r) => (timer = setTimeout(r, CLEANUP_LIMIT_MS))),
      ]);
      clearTimeout(timer);
    }
    await this.finishInstance();
  }

  async close(): Promise<void> {
    await this.finishInstance();
    this.runner?.disconnect();
  }

  /**
   * Terminates the caller's ct instances whose run was started on this machine and is gone
   * (killed, or leaked before it could clean up); with `all`, every ct instance the caller
   * launched, including kept ones and those of runs still going.
   */
  async sweep(options: { all?: boolean } = {}): Promise<SweepReport> {
    await this.preflight();
    const { ec2 } = this.clients!;
    const found = await findInstances(ec2, { [TAGS.managedBy]: MANAGED_BY, [TAGS.launchedBy]: this.identity!.name });
    const removed: string[] = [];
    const kept: string[] = [];
    for (const inst of found) {
      const id = inst.InstanceId!;
      const label = `${id} (${tagValue(inst.Tags, TAGS.name) ?? 'unnamed'})`;
      const runId = tagValue(inst.Tags, TAGS.runId);
      const ours = tagValue(inst.Tags, TAGS.host) === hostname();
      const keptByUser = tagValue(inst.Tags, TAGS.kept) === 'true';
      const orphan =
        options.all ||
        (!keptByUser && !!runId && ours && (this.ctx.registry.isOrphan(runId) || !this.ctx.registry.owner(runId)));
      if (id === this.instanceId || runId === this.ctx.runId || !orphan) {
        kept.push(label);
        continue;
      }
      await terminateInstance(ec2, id);
      this.knownHosts.forget(id);
      removed.push(label);
    }
    return { removed, kept };
  }

  private ensureHost(signal?: AbortSignal): Promise<Ec2Host> {
    // Never relaunch after a failed setup: the error stands for the whole run.
    this.host ??= this.setUp(signal);
    return this.host;
  }

  private async initEnvironment(env: SandboxEnvSpec, signal?: AbortSignal): Promise<void> {
    const host = await this.ensureHost(signal);
    let t = Date.now();
    this.say('Transferring compose directory...');
    await host.stager.stage(env);
    this.say(`   Compose transferred in ${seconds(t)}s`);
    t = Date.now();
    this.say('Initializing Docker sandbox (via SSH to EC2)...');
    this.dockerChecked ??= host.docker.preflight();
    await this.dockerChecked;
    await host.docker.taskInit(env, signal);
    await prefetchImages(host.runner, env.composeFile, 1800_000, signal);
    this.say(`   Docker sandbox initialized in ${seconds(t)}s`);
    if (!this.readyAnnounced) {
      this.readyAnnounced = true;
      this.say('');
      this.say(`EC2 Docker sandbox ready! (Total setup: ${seconds(this.setupStarted)}s)`);
    }
  }

  /** Launch, wait, connect, install: the spec's setup phases, each timed. */
  private async setUp(signal?: AbortSignal): Promise<Ec2Host> {
    await this.preflight();
    const { config, runId, registry } = this.ctx;
    const c = config.ec2;
    const { ec2, ssm, instanceConnect } = this.clients!;
    const aborted = () => {
      if (signal?.aborted) throw new CancelledError('cancelled while setting up the EC2 instance');
    };

    this.setupStarted = Date.now();
    let t = this.setupStarted;
    this.say(`Launching EC2 instance (${c.instance_type} in ${c.region})...`);
    const source = this.sshSource!;
    const securityGroupId = await ensureSshSecurityGroup(ec2, {
      name: c.security_group,
      subnetId: c.subnet_id,
      cidr: source.cidr,
      ipVersion: source.version,
      launchedBy: this.identity!.name,
    });
    const imageId = await resolveAmi(ssm, { ami: c.ami, parameter: c.ami_parameter });
    aborted();
    const launched = await launchInstance(ec2, {
      imageId,
      instanceType: c.instance_type,
      securityGroupId,
      subnetId: c.subnet_id,
      rootVolumeGb: c.root_volume_gb,
      clientToken: `ct-${runId}`,
      tags: {
        [TAGS.name]: `${c.name_prefix}eval-${runId}`,
        [TAGS.launchedBy]: this.identity!.name,
        [TAGS.managedBy]: MANAGED_BY,
        [TAGS.runId]: runId,
        [TAGS.host]: hostname(),
        // Tagged at launch: the fleet IAM policy allows tags only there (nobody retags instances).
        ...(c.keep_instance ? { [TAGS.kept]: 'true' } : {}),
      },
    });
    const instanceId = launched.InstanceId!;
    this.instanceId = instanceId;
    this.cancelExitHook = terminateOnExit(instanceId, c.region);
    this.publicIp = launched.PublicIpAddress;
    this.say(`   Instance ID: ${instanceId}`);
    if (this.publicIp) this.say(`   Public IP: ${this.publicIp}`);
    this.say(`   Instance created in ${seconds(t)}s`);
    aborted();

    t = Date.now();
    this.say('Waiting for instance to be ready and SSH available...');
    const running = await waitForRunning(ec2, instanceId, c.ready_timeout * 1000, signal);
    if (!this.publicIp && running.PublicIpAddress) {
      this.publicIp = running.PublicIpAddress;
      this.say(`   Public IP: ${this.publicIp}`);
    }
    const endpoint = this.sshEndpoint();
    await waitForPort(endpoint.host, endpoint.port, PORT_WAIT_MS, signal);
    this.say(`   Instance ready in ${seconds(t)}s`);

    t = Date.now();
    this.say('Establishing SSH connection...');
    const key = new InstanceConnectKey(instanceConnect, instanceId, c.ssh_user);
    const runner = new SshRunner({
      host: endpoint.host,
      port: endpoint.port,
      username: c.ssh_user,
      auth: { keys: [{ source: 'the EC2 Instance Connect key', key: Buffer.from(key.privateKey) }], skipped: [] },
      // Host keys are recorded per instance: public IPs are reused by other instances later.
      hostKeyAlias: instanceId,
      beforeConnect: () => key.ensurePushed(),
      ...sshRunnerOptions(config),
    });
    this.runner = runner;
    await connectWithRetries(runner, key, c.ssh_attempts, signal, () => `security group ${c.security_group} allows port 22 from ${source.cidr}`, (l) => this.say(l));
    this.say(`   SSH connected in ${seconds(t)}s`);

    t = Date.now();
    this.say('Installing dependencies (Docker, docker-compose)...');
    const deps = await ensureDocker(runner, signal);
    if (deps.relogin) {
      runner.disconnect();
      await runner.connect();
    }
    this.say(`   Dependencies installed in ${seconds(t)}s`);
    aborted();

    const stager = new CodebaseStager(runner, remoteEnvRoot(runner));
    const docker = new DockerProvider({
      runner,
      runId,
      registry,
      compose: config.sandbox.compose,
      startTimeout: config.sandbox.start_timeout,
      networkPool: config.sandbox.network_pool,
      execChannel: config.sandbox.exec_channel,
      execAgent: config.sandbox.exec_agent,
      onNotice: this.ctx.onNotice,
      stageComposeFile: (env) => stager.stage(env),
    });
    return { instanceId, runner, docker, stager };
  }

  /** Where to SSH: ec2.ssh_endpoint when set (a tunnel or bastion), else the public IP on port 22. */
  private sshEndpoint(): { host: string; port: number } {
    const override = this.ctx.config.ec2.ssh_endpoint;
    if (override) {
      const i = override.lastIndexOf(':');
      return { host: override.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(override.slice(i + 1)) };
    }
    if (!this.publicIp) {
      throw new ConfigError(
        `instance ${this.instanceId} has no public IP address (its subnet does not assign one). Set ec2.subnet_id to a ` +
          'public subnet, or ec2.ssh_endpoint (CT_EC2_SSH_ENDPOINT=host:port) to a tunnel that reaches it.',
      );
    }
    return { host: this.publicIp, port: 22 };
  }

  /** Terminates the instance, or (kept: tagged so at launch) prints how to use and remove it. */
  private async finishInstance(): Promise<void> {
    if (!this.instanceId || this.finished) return;
    this.finished = true;
    const id = this.instanceId;
    const { ec2 } = this.clients!;
    const c = this.ctx.config.ec2;
    if (c.keep_instance) {
      await this.runner?.close().catch(() => {});
      this.cancelExitHook?.();
      this.say(
        [
          `EC2 instance ${id} is still running (--keep-ec2-instance); it is billed until terminated.`,
          `   Connect:   aws ec2-instance-connect ssh --instance-id ${id} --os-user ${c.ssh_user} --region ${c.region}` +
            (this.publicIp ? `  (public IP ${this.publicIp})` : ''),
          `   Terminate: aws ec2 terminate-instances --instance-ids ${id} --region ${c.region}`,
        ].join('\n'),
      );
      return;
    }
    this.runner?.disconnect();
    try {
      await terminateInstance(ec2, id);
      this.cancelExitHook?.();
      this.knownHosts.forget(id);
      this.say(`EC2 instance ${id} terminated.`);
    } catch (e) {
      // The exit hook stays armed and tries once more when the process ends.
      this.say(
        `could not terminate EC2 instance ${id}: ${errorMessage(e)}\n` +
          `   Terminate it yourself: aws ec2 terminate-instances --instance-ids ${id} --region ${c.region}`,
      );
    }
  }
}

/** `--sandbox ec2`. */
export function createEc2Provider(ctx: Ec2ProviderContext): Ec2Provider {
  return new Ec2Provider(ctx);
}

function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}

/** Waits until a TCP port accepts connections (polled every 2 s). */
async function waitForPort(host: string, port: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (signal?.aborted) throw new CancelledError('cancelled while waiting for SSH');
    const open = await new Promise<boolean>((resolve) => {
      const s = connect({ host, port, timeout: 5_000 });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('timeout', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) {
      throw new SandboxUnavailableError(`port ${port} of ${host} did not open within ${Math.round(timeoutMs / 1000)} s`);
    }
    await sleep(2_000, signal);
  }
}

/**
 * Connects, retrying while the instance finishes booting: up to `attempts` tries, waiting 2 s,
 * 4 s, 6 s ... between them (about 90 s in all for 10). A refused login re-pushes the key.
 * Host key and permission problems are not retried.
 */
async function connectWithRetries(
  runner: SshRunner,
  key: InstanceConnectKey,
  attempts: number,
  signal: AbortSignal | undefined,
  hint: () => string,
  say: (line: string) => void,
): Promise<void> {
  let last: unknown;
  for (let i = 1; i <= attempts; i++) {
    if (signal?.aborted) throw new CancelledError('cancelled while connecting over SSH');
    try {
      await runner.connect();
      return;
    } catch (e) {
      last = e;
      if (e instanceof ConfigError || (e instanceof CtError && e.kind === 'cancelled')) throw e;
      if (/did not accept any key/.test(errorMessage(e))) key.invalidate();
      if (i < attempts) {
        // Each failed attempt is said: a wait of minutes never passes without a reason.
        say(`   SSH attempt ${i} of ${attempts} failed (${errorMessage(e).split('\n')[0]!.slice(0, 200)}); trying again in ${2 * i} s`);
        await sleep(2_000 * i, signal);
      }
    }
  }
  throw new SandboxUnavailableError(
    `could not connect over SSH to ${runner.target} after ${attempts} attempts: ${errorMessage(last)}. Check that ${hint()}.`,
  );
}

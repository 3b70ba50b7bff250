/**
 * An instance harness: what boots EC2 instances that moto only records. It watches moto for
 * running instances, reads each one's user-data and runs it as a bash process in its own process
 * group and its own root directory (CT_BOOT_ROOT: the script's /opt, /var/log and /root), with
 *
 * - its own instance metadata server on loopback (IMDSv2 tokens; instance id, region, the
 *   instance role's credentials — the only credentials the script gets — and a spot
 *   interruption notice the test switches on);
 * - PATH shims: `iptables` (recorded, so this machine's firewall is never touched), `shutdown` (`now` tells the harness, which terminates the instance in moto when its
 *   shutdown behaviour is `terminate` and stops it when `stop`; `+M` is recorded), and package
 *   installers (apt-get, apt, snap: recorded, no-ops), after the test's own (`pathPrefix`);
 * - AWS_ENDPOINT_URL pointing at moto and no AWS_* key in its environment.
 *
 * An instance terminated in moto by anyone (the controller, the harness, the test) ends as a real
 * one does: its processes get SIGTERM, 5 s later SIGKILL, and then whatever containers it left on
 * the (shared) Docker Engine go with the machine: the compose projects of the ct runs recorded in
 * the instance's own state directory are removed. A worker AMI is emulated by placing the prepared dependency tree the user-data looks
 * for under the instance's root (`ami: true` for the image ids given).
 */
import { DescribeInstanceAttributeCommand, DescribeInstancesCommand, EC2Client, StopInstancesCommand, TerminateInstancesCommand } from '@aws-sdk/client-ec2';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync, type Dirent } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FAKE_AWS } from '../../helpers/fleet.js';
import { REPO_ROOT } from '../../helpers/paths.js';

export interface HarnessOptions {
  motoUrl: string;
  region?: string;
  /** Extra environment for every instance's script (scaled-down CT_* timeouts). */
  env?: Record<string, string>;
  /** The AWS endpoint the instances' scripts use (default motoUrl; a fault proxy in front of it). */
  instanceAwsUrl?: string;
  /** Image ids that stand for a worker AMI: the prepared node_modules is in place. */
  workerAmis?: string[];
  /**
   * Image ids that stand for stock Ubuntu 22.04: the script's PATH holds only a base system
   * (coreutils, bash, curl, tar, git); `apt-get install` of docker.io, awscli or nodejs links
   * this machine's binary in, and NodeSource's setup script is served by the metadata server.
   */
  stockImages?: string[];
  /** Runs before an instance's script starts (a test may break something first). */
  beforeBoot?: (instanceId: string) => Promise<void>;
  /** How often moto is polled (ms). */
  pollMs?: number;
  /** Directories put first on every instance's PATH (stand-ins for what needs the internet). */
  pathPrefix?: string[];
}

export interface EmulatedInstance {
  id: string;
  imageId: string;
  /** The instance profile it was launched with (moto drops it on termination). */
  profileArn?: string;
  root: string;
  userData: string;
  /** Environment the script ran with. */
  env: NodeJS.ProcessEnv;
  process: ChildProcess;
  /** Credential requests answered by its metadata server. */
  credentialFetches: number;
  /** Arguments of every `shutdown` call. */
  shutdowns: string[];
  /** Arguments of every package-installer call. */
  installs: string[];
  /** When it was seen running, and when its script ended (ms since epoch). */
  bootedAt: number;
  exitedAt?: number;
  /**
   * When it was terminated in moto (ms since epoch): by the harness on the script's `shutdown -h
   * now`, or first seen terminated (ended by its launcher) — where EC2 stops charging for it.
   */
  terminatedAt?: number;
  exitCode?: number | null;
  /** The spot notice its metadata answers (undefined: 404, as AWS without a notice). */
  spotAction?: { action: string; time: string };
  server: Server;
}

const SHUTDOWN_SHIM = `#!/bin/sh
echo "$*" >> "$CT_BOOT_ROOT/.harness/shutdown-calls"
case "$*" in
  *now*) curl -s -m 5 -X POST "$CT_IMDS_ENDPOINT/harness/shutdown" >/dev/null ;;
esac
exit 0
`;
const IPTABLES_SHIM = `#!/bin/sh
echo "$*" >> "$CT_BOOT_ROOT/.harness/iptables-calls"
case "$1" in -C) exit 1 ;; esac
exit 0
`;
const INSTALLER_SHIM = (name: string) => `#!/bin/sh
echo "${name} $*" >> "$CT_BOOT_ROOT/.harness/installs"
exit 0
`;
/** What a stock Ubuntu 22.04 cloud image has on its PATH (of what the bootstrap uses). */
const STOCK_TOOLS = ['bash', 'sh', 'env', 'date', 'mkdir', 'rm', 'tar', 'gzip', 'sha256sum', 'cut', 'hostname', 'curl', 'cat', 'sleep', 'ln', 'cp', 'mv', 'grep', 'sed', 'tail', 'head', 'dirname', 'basename', 'readlink', 'chmod', 'uname', 'tee', 'git', 'id'];
/** Binaries an `apt-get install` of these packages puts on the PATH. */
const PACKAGE_BINARIES: Record<string, string[]> = { 'docker.io': ['docker'], awscli: ['aws'], nodejs: ['node', 'npm', 'npx'] };
/** apt-get on a stock image: records the call and links this machine's binaries of the packages named. */
const APT_SHIM = (links: Record<string, string>) => `#!/bin/sh
echo "apt-get $*" >> "$CT_BOOT_ROOT/.harness/installs"
for p in "$@"; do
  case "$p" in
${Object.entries(PACKAGE_BINARIES)
  .map(([pkg, bins]) => `    ${pkg}) ${bins.map((b) => `ln -sf ${links[b]} "$CT_BOOT_ROOT/.harness/sys/${b}"`).join('; ')} ;;`)
  .join('\n')}
  esac
done
exit 0
`;

export class InstanceHarness {
  readonly instances = new Map<string, EmulatedInstance>();
  private readonly ec2: EC2Client;
  private timer?: NodeJS.Timeout;
  private polling = false;
  private stopped = false;
  private readonly base = mkdtempSync(join(tmpdir(), 'ct-instances-'));
  private readonly lockHash = createHash('sha256').update(readFileSync(join(REPO_ROOT, 'package-lock.json'))).digest('hex');
  /** Errors in the harness itself (reported by the test). */
  readonly errors: string[] = [];
  /** Ends of instances under way (group killed, containers removed). */
  private readonly ending = new Map<string, Promise<void>>();
  /** Containers removed with instances that ended while running them (the machine went away). */
  readonly containersGone: string[] = [];

  constructor(private readonly o: HarnessOptions) {
    this.ec2 = new EC2Client({
      region: o.region ?? 'us-east-1',
      endpoint: o.motoUrl,
      credentials: { accessKeyId: FAKE_AWS.AWS_ACCESS_KEY_ID, secretAccessKey: FAKE_AWS.AWS_SECRET_ACCESS_KEY },
    });
  }

  start(): void {
    this.timer = setInterval(() => void this.poll(), this.o.pollMs ?? 300);
  }

  private async poll(): Promise<void> {
    if (this.polling || this.stopped) return;
    this.polling = true;
    try {
      const r = await this.ec2.send(new DescribeInstancesCommand({}));
      for (const res of r.Reservations ?? []) {
        for (const i of res.Instances ?? []) {
          const id = i.InstanceId!;
          const state = i.State?.Name;
          const known = this.instances.get(id);
          if (!known && state === 'running') await this.boot(id, i.ImageId!, i.IamInstanceProfile?.Arn);
          else if (known && (state === 'terminated' || state === 'shutting-down')) {
            known.terminatedAt ??= Date.now();
            void this.kill(known);
          }
        }
      }
    } catch (e) {
      this.errors.push(`poll: ${(e as Error).message}`);
    } finally {
      this.polling = false;
    }
  }

  private async boot(id: string, imageId: string, profileArn: string | undefined): Promise<void> {
    const attr = await this.ec2.send(new DescribeInstanceAttributeCommand({ InstanceId: id, Attribute: 'userData' }));
    const userData = Buffer.from(attr.UserData?.Value ?? '', 'base64').toString('utf8');
    const root = join(this.base, id);
    const bin = join(root, '.harness', 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'shutdown'), SHUTDOWN_SHIM);
    writeFileSync(join(bin, 'iptables'), IPTABLES_SHIM);
    for (const name of ['apt-get', 'apt', 'snap']) writeFileSync(join(bin, name), INSTALLER_SHIM(name));
    for (const f of ['shutdown', 'iptables', 'apt-get', 'apt', 'snap']) chmodSync(join(bin, f), 0o755);
    const stock = this.o.stockImages?.includes(imageId);
    const sys = join(root, '.harness', 'sys');
    if (stock) {
      mkdirSync(sys);
      const which = (t: string) => execFileSync('bash', ['-c', `command -v ${t}`], { encoding: 'utf8' }).trim();
      for (const t of STOCK_TOOLS) symlinkSync(which(t), join(sys, t));
      const links = Object.fromEntries(Object.values(PACKAGE_BINARIES).flat().map((b) => [b, b === 'aws' ? realAws(which) : which(b)]));
      writeFileSync(join(bin, 'apt-get'), APT_SHIM(links));
    }
    if (this.o.workerAmis?.includes(imageId)) {
      const prepared = join(root, 'opt', 'ct-ami', 'node_modules', this.lockHash);
      mkdirSync(prepared, { recursive: true });
      symlinkSync(join(REPO_ROOT, 'node_modules'), join(prepared, 'node_modules'));
    }
    writeFileSync(join(root, '.harness', 'user-data.sh'), userData);
    const inst = { id, imageId, profileArn, root, userData, credentialFetches: 0, shutdowns: [], installs: [], bootedAt: Date.now() } as unknown as EmulatedInstance;
    this.instances.set(id, inst);
    inst.server = await this.metadataServer(inst);
    await this.o.beforeBoot?.(id);
    const port = (inst.server.address() as AddressInfo).port;
    // Only what cloud-init would give, plus the harness's endpoints: no AWS_* key, no profile.
    inst.env = {
      PATH: [...(this.o.pathPrefix ?? []), bin, stock ? sys : process.env.PATH].join(':'),
      ...(stock ? { CT_NODE_SETUP_URL: `http://127.0.0.1:${port}/harness/nodesource-setup` } : {}),
      LANG: 'C.UTF-8',
      CT_BOOT_ROOT: root,
      CT_IMDS_ENDPOINT: `http://127.0.0.1:${port}`,
      AWS_ENDPOINT_URL: this.o.instanceAwsUrl ?? this.o.motoUrl,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
      ...this.o.env,
    };
    const child = spawn('bash', [join(root, '.harness', 'user-data.sh')], { cwd: root, env: inst.env, detached: true, stdio: 'ignore' });
    inst.process = child;
    child.once('exit', (code) => {
      inst.exitedAt = Date.now();
      inst.exitCode = code;
      inst.shutdowns = readLines(join(root, '.harness', 'shutdown-calls'));
      inst.installs = readLines(join(root, '.harness', 'installs'));
    });
  }

  private metadataServer(inst: EmulatedInstance): Promise<Server> {
    const token = randomBytes(16).toString('hex');
    const role = 'linuxbench-worker';
    const server = createServer((req, res) => {
      const url = req.url ?? '';
      const send = (status: number, body: string) => {
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.end(body);
      };
      if (req.method === 'POST' && url === '/harness/shutdown') {
        send(200, 'ok');
        void this.shutdown(inst);
        return;
      }
      if (url === '/harness/nodesource-setup') return send(200, 'echo "NodeSource repository for Node 20 configured"\n');
      if (req.method === 'PUT' && url === '/latest/api/token') return send(200, token);
      if (req.headers['x-aws-ec2-metadata-token'] !== token) return send(401, 'IMDSv2 token required');
      const path = url.replace(/^\/latest\/meta-data\//, '');
      if (path === 'instance-id') return send(200, inst.id);
      if (path === 'placement/region') return send(200, this.o.region ?? 'us-east-1');
      if (path === 'spot/instance-action') return inst.spotAction ? send(200, JSON.stringify(inst.spotAction)) : send(404, 'Not Found');
      if (path === 'iam/security-credentials/' || path === 'iam/security-credentials') return send(200, role);
      if (path === `iam/security-credentials/${role}`) {
        inst.credentialFetches++;
        return send(
          200,
          JSON.stringify({
            Code: 'Success',
            LastUpdated: new Date().toISOString(),
            Type: 'AWS-HMAC',
            AccessKeyId: `ASIAROLE${inst.id.slice(-8).toUpperCase()}`,
            SecretAccessKey: 'role-secret-of-the-instance',
            Token: 'role-session-token',
            Expiration: new Date(Date.now() + 3_600_000).toISOString(),
          }),
        );
      }
      send(404, 'Not Found');
    });
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
  }

  /** `shutdown -h now` inside the instance: terminated (or stopped) in moto as its shutdown behaviour says, process group ended. */
  private async shutdown(inst: EmulatedInstance): Promise<void> {
    try {
      const a = await this.ec2.send(new DescribeInstanceAttributeCommand({ InstanceId: inst.id, Attribute: 'instanceInitiatedShutdownBehavior' }));
      const behaviour = a.InstanceInitiatedShutdownBehavior?.Value;
      // moto would "stop" an instance already terminated (AWS cannot): leave an ended one alone.
      const state = (await this.ec2.send(new DescribeInstancesCommand({ InstanceIds: [inst.id] }))).Reservations?.[0]?.Instances?.[0]?.State?.Name;
      if (state === 'terminated' || state === 'shutting-down') {
        // already ended by its launcher
      } else if (behaviour === 'stop') await this.ec2.send(new StopInstancesCommand({ InstanceIds: [inst.id] }));
      else if (behaviour !== 'terminate') this.errors.push(`${inst.id}: shutdown behaviour is ${behaviour}, neither terminate nor stop`);
      else {
        await this.ec2.send(new TerminateInstancesCommand({ InstanceIds: [inst.id] }));
        inst.terminatedAt ??= Date.now();
      }
    } catch (e) {
      this.errors.push(`shutdown of ${inst.id}: ${(e as Error).message}`);
    }
    // The script exits right after `shutdown -h now`; what is left of its group goes.
    setTimeout(() => void this.kill(inst), 1000);
  }

  /** Switches on the spot interruption notice of an instance, `seconds` ahead. */
  spotNotice(id: string, seconds: number): void {
    const inst = this.instances.get(id)!;
    inst.spotAction = { action: 'terminate', time: new Date(Date.now() + seconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z') };
  }

  /**
   * The instance goes away: SIGTERM to its processes, SIGKILL 5 s later (at once when `abrupt`:
   * a hardware failure or a reclaim with no time to shut down), then its containers.
   */
  private kill(inst: EmulatedInstance, abrupt = false): Promise<void> {
    const under = this.ending.get(inst.id);
    if (under) return under;
    const end = (async () => {
      inst.server?.close();
      const pid = inst.process?.pid;
      if (pid && groupAlive(pid)) {
        if (!abrupt) {
          groupKill(pid, 'SIGTERM');
          for (let i = 0; i < 50 && groupAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
        }
        groupKill(pid, 'SIGKILL');
        for (let i = 0; i < 20 && groupAlive(pid); i++) await new Promise((r) => setTimeout(r, 50));
      }
      this.removeContainersOf(inst);
    })();
    this.ending.set(inst.id, end);
    return end;
  }

  /**
   * Compose projects (containers and networks) of the ct runs the instance's state directory
   * still records: a worker that ended normally removed both its sandboxes and its record.
   */
  private removeContainersOf(inst: EmulatedInstance): void {
    const runIds = findRunRecords(join(inst.root, 'root')).map((f) => f.replace(/\.json$/, ''));
    if (!runIds.length) return;
    const owned = (project: string) => runIds.some((r) => project.startsWith(`ct-${r}-`));
    try {
      const label = '{{.ID}} {{.Label "com.docker.compose.project"}}';
      const containers = execFileSync('docker', ['ps', '-a', '--filter', 'label=com.docker.compose.project', '--format', label], { encoding: 'utf8' })
        .split('\n')
        .map((l) => l.split(' '))
        .filter(([id, project]) => id && project && owned(project));
      if (containers.length) {
        execFileSync('docker', ['rm', '-f', '-v', ...containers.map(([id]) => id!)], { stdio: 'ignore' });
        this.containersGone.push(...containers.map(([, project]) => `${inst.id}:${project}`));
      }
      const networks = execFileSync('docker', ['network', 'ls', '--filter', 'label=com.docker.compose.project', '--format', label], { encoding: 'utf8' })
        .split('\n')
        .map((l) => l.split(' '))
        .filter(([id, project]) => id && project && owned(project));
      if (networks.length) execFileSync('docker', ['network', 'rm', ...networks.map(([id]) => id!)], { stdio: 'ignore' });
    } catch (e) {
      this.errors.push(`removing the containers of ${inst.id}: ${(e as Error).message}`);
    }
  }

  /**
   * Terminates an instance in moto, as the console or a reclaim would; `abrupt`: its processes
   * are killed at once, with no time to hand anything back.
   */
  async terminate(id: string, o: { abrupt?: boolean } = {}): Promise<void> {
    const inst = this.instances.get(id)!;
    const ending = this.kill(inst, o.abrupt);
    await this.ec2.send(new TerminateInstancesCommand({ InstanceIds: [id] }));
    inst.terminatedAt ??= Date.now();
    await ending;
  }

  /** Process groups of instances that still have a process. */
  liveGroups(): string[] {
    return [...this.instances.values()].filter((i) => i.process?.pid && groupAlive(i.process.pid)).map((i) => i.id);
  }

  /** The bootstrap log an instance wrote locally. */
  localLog(id: string): string {
    try {
      return readFileSync(join(this.instances.get(id)!.root, 'var', 'log', 'ct-bootstrap.log'), 'utf8');
    } catch {
      return '';
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    while (this.polling) await new Promise((r) => setTimeout(r, 50));
    await Promise.all([...this.instances.values()].map((inst) => this.kill(inst)));
    this.ec2.destroy();
  }

  cleanup(): void {
    rmSync(this.base, { recursive: true, force: true });
  }
}

/** The AWS CLI itself: a pyenv shim on PATH needs pyenv's own PATH, so its target is linked instead. */
function realAws(which: (t: string) => string): string {
  try {
    return execFileSync('pyenv', ['which', 'aws'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return which('aws');
  }
}

/** Run records (`runs/<runId>.json`) of ct's state directories under `dir`. */
function findRunRecords(dir: string): string[] {
  const found: string[] = [];
  const walk = (d: string, depth: number) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory() || e.isSymbolicLink()) continue;
      if (e.name === 'runs') found.push(...readdirSync(join(d, e.name)).filter((n) => /^[a-z0-9]{8}\.json$/.test(n)));
      else if (depth < 6 && e.name !== 'node_modules' && e.name !== 'ct') walk(join(d, e.name), depth + 1);
    }
  };
  walk(dir, 0);
  return found;
}

function readLines(path: string): string[] {
  try {
    return readFileSync(path, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

function groupKill(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * What of the host a compose file hands its containers: privileged mode, added capabilities,
 * devices, the host's namespaces, host paths outside the environment's folder, the Docker
 * socket, disabled confinement, host-wide sysctls, other containers' namespaces or volumes.
 * Each is a *power*, named by the token that trusts it in ct.config.yml
 * (`settings.<name>.trust`), e.g. `privileged`, `cap_add:SYS_ADMIN`, `bind:/var/data`.
 *
 * Compose has no library that answers this, so the walk is written here; whatever cannot be
 * checked (an `extends`/`include` outside the folder, a path built from a variable) is itself a
 * power, refused until trusted.
 */
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { parse } from 'yaml';
import { ConfigError } from '../../errors.js';

/** One power a compose file gives, and where. */
export interface HostPower {
  /** The compose file that asks for it (absolute path). */
  file: string;
  /** `services.<name>`, or a top-level entry such as `volumes.<name>` or `include`. */
  where: string;
  /** The compose key, e.g. `cap_add`, `volumes`, `security_opt`. */
  key: string;
  /** The token that trusts it, e.g. `cap_add:SYS_ADMIN`, `bind:/var/data`, `docker_socket`. */
  power: string;
}

/**
 * Capabilities a service may add without trust: Docker's default set, so adding one gives
 * nothing a default container lacks (it matters only after a `cap_drop`).
 */
export const SAFE_CAPABILITIES: readonly string[] = [
  'AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'MKNOD', 'NET_BIND_SERVICE', 'NET_RAW',
  'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT',
];

/**
 * Sysctls Docker scopes to the container's own namespaces (its list of namespaced sysctls);
 * any other one would be the host's.
 */
const NAMESPACED_SYSCTL = /^(net\.|kernel\.shm|kernel\.msg|kernel\.sem$|fs\.mqueue\.|kernel\.domainname$|kernel\.hostname$)/;

/** Sockets that drive a container engine: a mount of one is the host. */
const ENGINE_SOCKETS = new Set(['docker.sock', 'containerd.sock', 'podman.sock', 'dockershim.sock']);

/** Namespace keys whose `host` value is the host's namespace; the first three also take `container:NAME`. */
const NAMESPACE_KEYS = ['network_mode', 'pid', 'ipc', 'uts', 'userns_mode', 'cgroup'] as const;

/** Deepest `extends`/`include` chain followed before the file is refused (compose files nest a few levels at most). */
const MAX_DEPTH = 8;

/**
 * The trust tokens ct.config.yml may list, one pattern each; a token outside them is a
 * configuration error (a typo would otherwise trust nothing, silently).
 */
const TOKEN_PATTERNS: readonly RegExp[] = [
  /^(privileged|docker_socket)$/,
  /^cap_add:[A-Z0-9_]+$/,
  /^(network_mode|pid|ipc|uts|userns_mode|cgroup):host$/,
  /^(network_mode|pid|ipc|volumes_from):container:.+$/,
  /^(bind|device|device_cgroup_rules|security_opt|sysctls|extends|include|volume_driver|network_driver):.+$/,
];

/** Why a trust token is not one ct knows, or undefined when it is. */
export function trustTokenProblem(token: string): string | undefined {
  if (TOKEN_PATTERNS.some((re) => re.test(token))) return undefined;
  return 'not a host power ct knows (privileged, cap_add:NAME, network_mode:host, pid:host, bind:PATH, docker_socket, device:PATH, security_opt:VALUE, ...; docs/security.md lists them all)';
}

/** Every power the compose file (and what it includes or extends) gives; `envDir` is the environment's folder. */
export function composeHostPowers(composeFile: string, envDir: string): HostPower[] {
  const walker = new PowerWalk(realPath(resolve(envDir)));
  walker.file(resolve(composeFile), 0);
  return walker.found;
}

type Doc = Record<string, unknown>;

class PowerWalk {
  readonly found: HostPower[] = [];
  private readonly seen = new Set<string>();

  constructor(private readonly envDir: string) {}

  /** Checks a whole file (the compose file, or one it includes). */
  file(path: string, depth: number): void {
    if (this.seen.has(path)) return;
    this.seen.add(path);
    const doc = readYaml(path);
    const base = dirname(path);
    const add = (where: string, key: string, power: string): void => void this.found.push({ file: path, where, key, power });
    const services = asMap(doc.services);
    for (const [name, svc] of Object.entries(services)) this.service(path, base, name, asMap(svc), Object.keys(services), depth);
    for (const entry of asList(doc.include)) {
      const paths = typeof entry === 'string' ? [entry] : asList(asMap(entry).path).map(String);
      for (const p of paths) this.follow(path, 'include', 'include', p, depth, (f) => this.file(f, depth + 1));
      for (const env of asList(asMap(entry).env_file)) this.hostPath(base, String(env), (power) => add('include', 'env_file', power));
    }
    for (const [name, vol] of Object.entries(asMap(doc.volumes))) {
      const v = asMap(vol);
      if (typeof v.driver === 'string' && !['local', ''].includes(v.driver)) add(`volumes.${name}`, 'driver', `volume_driver:${v.driver}`);
      const opts = asMap(v.driver_opts);
      const isBind = /(^|,)\s*r?bind\s*(,|$)/.test(String(opts.o ?? '')) || String(opts.type ?? '') === 'none';
      if (isBind && opts.device !== undefined) this.hostPath(base, String(opts.device), (power) => add(`volumes.${name}`, 'driver_opts.device', power));
    }
    for (const [name, net] of Object.entries(asMap(doc.networks))) {
      const n = asMap(net);
      const driver = String(n.driver ?? '');
      if (driver === 'host' || (n.external && (n.name ?? name) === 'host')) add(`networks.${name}`, 'driver', 'network_mode:host');
      else if (driver === 'macvlan' || driver === 'ipvlan') add(`networks.${name}`, 'driver', `network_driver:${driver}`);
    }
    for (const section of ['secrets', 'configs']) {
      for (const [name, item] of Object.entries(asMap(doc[section]))) {
        const f = asMap(item).file;
        if (f !== undefined) this.hostPath(base, String(f), (power) => add(`${section}.${name}`, 'file', power));
      }
    }
  }

  private service(file: string, base: string, name: string, svc: Doc, names: string[], depth: number): void {
    const where = `services.${name}`;
    const add = (key: string, power: string): void => void this.found.push({ file, where, key, power });
    if (truthy(svc.privileged)) add('privileged', 'privileged');
    for (const c of asList(svc.cap_add)) {
      const cap = String(c).toUpperCase().replace(/^CAP_/, '');
      if (!SAFE_CAPABILITIES.includes(cap)) add('cap_add', `cap_add:${cap}`);
    }
    for (const d of asList(svc.devices)) {
      const source = typeof d === 'string' ? d.split(':')[0]! : String(asMap(d).source ?? '');
      add('devices', `device:${source}`);
    }
    for (const r of asList(svc.device_cgroup_rules)) add('device_cgroup_rules', `device_cgroup_rules:${String(r)}`);
    for (const key of NAMESPACE_KEYS) {
      const v = svc[key];
      if (v === undefined || v === null) continue;
      const text = String(v);
      if (text === 'host') add(key, `${key}:host`);
      else if (text.startsWith('container:')) add(key, `${key}:${text}`);
      else if (text.includes('$')) add(key, `${key}:${text}`);
    }
    for (const o of asList(svc.security_opt)) {
      const opt = String(o).replace(/^([a-z-]+)=/, '$1:');
      if (/^(seccomp|apparmor|systempaths):unconfined$|^label:(disable|type:)|^seccomp:(?!unconfined$)/.test(opt)) add('security_opt', `security_opt:${opt}`);
    }
    const sysctls = Array.isArray(svc.sysctls) ? svc.sysctls.map((s) => String(s).split('=')[0]!) : Object.keys(asMap(svc.sysctls));
    for (const s of sysctls) if (!NAMESPACED_SYSCTL.test(s.trim())) add('sysctls', `sysctls:${s.trim()}`);
    for (const v of asList(svc.volumes_from)) {
      const text = String(v);
      if (text.startsWith('container:')) add('volumes_from', `volumes_from:${text.replace(/:(ro|rw)$/, '')}`);
      else if (!names.includes(text.replace(/:(ro|rw)$/, ''))) add('volumes_from', `volumes_from:container:${text}`);
    }
    if (typeof svc.volume_driver === 'string' && svc.volume_driver !== 'local') add('volume_driver', `volume_driver:${svc.volume_driver}`);
    for (const v of asList(svc.volumes)) this.volume(base, v, (power) => add('volumes', power));
    for (const e of asList(svc.env_file)) {
      const p = typeof e === 'string' ? e : asMap(e).path;
      if (p !== undefined) this.hostPath(base, String(p), (power) => add('env_file', power));
    }
    this.build(base, svc.build, add);
    if (svc.extends !== undefined) {
      const ext = typeof svc.extends === 'string' ? { service: svc.extends } : asMap(svc.extends);
      // Within the same file the base service is checked as one of this file's services.
      if (ext.file !== undefined) {
        this.follow(file, where, 'extends', String(ext.file), depth, (f) => {
          const other = asMap(readYaml(f).services);
          const target = asMap(other[String(ext.service)]);
          this.service(f, dirname(f), String(ext.service), target, Object.keys(other), depth + 1);
        });
      }
    }
  }

  private build(base: string, build: unknown, add: (key: string, power: string) => void): void {
    if (build === undefined || build === null) return;
    const b = typeof build === 'string' ? { context: build } : asMap(build);
    const context = b.context === undefined ? '.' : String(b.context);
    if (!isRemoteContext(context)) {
      this.hostPath(base, context, (power) => add('build.context', power));
      if (typeof b.dockerfile === 'string') this.hostPath(resolve(base, context), b.dockerfile, (power) => add('build.dockerfile', power));
    }
    const extra = Array.isArray(b.additional_contexts)
      ? b.additional_contexts.map((s) => String(s).split('=').slice(1).join('='))
      : Object.values(asMap(b.additional_contexts)).map(String);
    for (const c of extra) if (!isRemoteContext(c) && !/^(docker-image|service|target):/.test(c)) this.hostPath(base, c, (power) => add('build.additional_contexts', power));
    if (truthy(b.privileged)) add('build.privileged', 'privileged');
    if (b.network === 'host') add('build.network', 'network_mode:host');
  }

  /** One entry of a service's `volumes:` (short `src:dst[:mode]` or long `{type, source, target}`). */
  private volume(base: string, v: unknown, add: (power: string) => void): void {
    if (typeof v === 'string') {
      if (/\$(?!\$)/.test(v)) return add(`bind:${v}`);
      const parts = v.split(':');
      if (parts.length < 2) return; // an anonymous volume
      const source = parts[0]!;
      if (/^[./~$]/.test(source)) this.hostPath(base, source, add);
      return;
    }
    const m = asMap(v);
    const type = String(m.type ?? 'volume');
    if ((type === 'bind' || type === 'npipe') && m.source !== undefined) this.hostPath(base, String(m.source), add);
  }

  /** A host path some key reads or mounts: a power when it leaves the environment's folder or is an engine socket. */
  private hostPath(base: string, raw: string, add: (power: string) => void): void {
    // Compose fills variables in from the environment of whoever runs it: not checkable here.
    if (/\$(?!\$)/.test(raw)) return add(`bind:${raw}`);
    const path = realPath(resolve(base, raw.replace(/^~(?=\/|$)/, homedir())));
    if (ENGINE_SOCKETS.has(basename(path)) || ENGINE_SOCKETS.has(basename(raw))) return add('docker_socket');
    if (!isInside(this.envDir, path)) add(`bind:${path}`);
  }

  /** An `include`/`extends` file: checked when it is inside the environment's folder, else a power. */
  private follow(file: string, where: string, key: string, raw: string, depth: number, check: (f: string) => void): void {
    const add = (power: string): void => void this.found.push({ file, where, key, power });
    if (/^[a-z][a-z0-9+.-]*:\/\/|^oci:|^git@/.test(raw) || /\$(?!\$)/.test(raw)) return add(`${key}:${raw}`);
    const path = realPath(resolve(dirname(file), raw));
    if (!isInside(this.envDir, path) || !existsSync(path) || depth >= MAX_DEPTH) return add(`${key}:${path}`);
    check(path);
  }
}

function readYaml(path: string): Doc {
  let doc: unknown;
  try {
    // merge: `<<: *anchor` must be seen, or a privileged anchor would pass unnoticed.
    doc = parse(readFileSync(path, 'utf8'), { merge: true });
  } catch (e) {
    throw new ConfigError(`cannot read compose file ${path}: ${(e as Error).message}`);
  }
  return asMap(doc);
}

/** The path with every symlink resolved, as far as it exists (the rest appended as written). */
function realPath(p: string): string {
  let head = p;
  const tail: string[] = [];
  for (;;) {
    try {
      return join(realpathSync(head), ...tail.reverse());
    } catch {
      const parent = dirname(head);
      if (parent === head) return p;
      tail.push(basename(head));
      head = parent;
    }
  }
}

function isInside(dir: string, p: string): boolean {
  const rel = relative(dir, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
}

function isRemoteContext(c: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//.test(c) || c.startsWith('git@') || /^github\.com\//.test(c);
}

function truthy(v: unknown): boolean {
  return v === true || (typeof v === 'string' && !/^(false|no|off|0)$/i.test(v.trim()));
}

function asMap(v: unknown): Doc {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Doc) : {};
}

function asList(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  if (v === undefined || v === null) return [];
  return [v];
}

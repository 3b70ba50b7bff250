/**
 * Compose keys that give a sandbox the host are refused before any sandbox starts: `ct envs
 * validate` names each (file, service, key, power) and exits 2, `ct run eval` exits 2 without
 * writing a log or creating a container, unless ct.config.yml trusts the setting with exactly
 * those powers; a trusted run says what it trusted. Nothing here starts a container.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { loadConfig } from '../../src/config/config.js';
import { ConfigError } from '../../src/errors.js';
import { composeHostPowers } from '../../src/sandbox/docker/compose-powers.js';
import { isTrusted, trustedLines, trustedPowers } from '../../src/tasks/compose-trust.js';
import { SettingsCatalog } from '../../src/tasks/environment-loader.js';
import { EXAMPLE_SETTINGS } from '../helpers/cli.js';
import { ct, removeTempDirs, show, tempDir } from './helpers/git-fixtures.js';

interface Case {
  name: string;
  /** Keys of the `default` service (YAML), or a whole compose file when `file` is set. */
  service?: string;
  file?: string;
  /** The power expected; `{root}`/`{setting}` stand for the settings folder and the setting's folder. */
  power: string;
  /** Where in the file (default services.default) and the key. */
  where?: string;
  key: string;
  /** Extra files in the environment folder, relative to codebase/ (a string is a symlink target when it starts with `->`). */
  files?: Record<string, string>;
}

const DANGEROUS: Case[] = [
  { name: 'privileged', service: 'privileged: true', power: 'privileged', key: 'privileged' },
  { name: 'cap_sys_admin', service: 'cap_add: [SYS_ADMIN]', power: 'cap_add:SYS_ADMIN', key: 'cap_add' },
  { name: 'cap_all', service: 'cap_add: [ALL]', power: 'cap_add:ALL', key: 'cap_add' },
  { name: 'cap_prefixed', service: 'cap_add: [cap_net_admin]', power: 'cap_add:NET_ADMIN', key: 'cap_add' },
  { name: 'devices', service: 'devices: ["/dev/kmsg:/dev/kmsg"]', power: 'device:/dev/kmsg', key: 'devices' },
  { name: 'network_host', service: 'network_mode: host', power: 'network_mode:host', key: 'network_mode' },
  { name: 'network_container', service: 'network_mode: "container:other"', power: 'network_mode:container:other', key: 'network_mode' },
  { name: 'pid_host', service: 'pid: host', power: 'pid:host', key: 'pid' },
  { name: 'ipc_host', service: 'ipc: host', power: 'ipc:host', key: 'ipc' },
  { name: 'uts_host', service: 'uts: host', power: 'uts:host', key: 'uts' },
  { name: 'userns_host', service: 'userns_mode: host', power: 'userns_mode:host', key: 'userns_mode' },
  { name: 'cgroup_host', service: 'cgroup: host', power: 'cgroup:host', key: 'cgroup' },
  { name: 'bind_short', service: 'volumes: ["/etc:/host-etc:ro"]', power: 'bind:/etc', key: 'volumes' },
  { name: 'bind_long', service: 'volumes: [{type: bind, source: /etc, target: /host-etc}]', power: 'bind:/etc', key: 'volumes' },
  { name: 'bind_root', service: 'volumes: ["/:/host"]', power: 'bind:/', key: 'volumes' },
  { name: 'socket_short', service: 'volumes: ["/var/run/docker.sock:/var/run/docker.sock"]', power: 'docker_socket', key: 'volumes' },
  { name: 'socket_long', service: 'volumes: [{type: bind, source: /run/docker.sock, target: /sock}]', power: 'docker_socket', key: 'volumes' },
  { name: 'bind_escape', service: 'volumes: ["../../..:/up"]', power: 'bind:{root}', key: 'volumes' },
  { name: 'bind_symlink', service: 'volumes: ["./inside:/x"]', power: 'bind:/etc', key: 'volumes', files: { inside: '->/etc' } },
  { name: 'bind_variable', service: 'volumes: ["${HOME}:/home"]', power: 'bind:${HOME}:/home', key: 'volumes' },
  {
    name: 'volume_driver_opts',
    file: 'services:\n  default:\n    image: debian\n    volumes: ["data:/data"]\nvolumes:\n  data:\n    driver_opts: {type: none, o: bind, device: /srv}\n',
    power: 'bind:/srv',
    where: 'volumes.data',
    key: 'driver_opts.device',
  },
  { name: 'seccomp', service: 'security_opt: ["seccomp:unconfined"]', power: 'security_opt:seccomp:unconfined', key: 'security_opt' },
  { name: 'apparmor', service: 'security_opt: ["apparmor=unconfined"]', power: 'security_opt:apparmor:unconfined', key: 'security_opt' },
  { name: 'label', service: 'security_opt: ["label:disable"]', power: 'security_opt:label:disable', key: 'security_opt' },
  { name: 'sysctl_host', service: 'sysctls: {kernel.panic: 1}', power: 'sysctls:kernel.panic', key: 'sysctls' },
  { name: 'volumes_from', service: 'volumes_from: ["container:other"]', power: 'volumes_from:container:other', key: 'volumes_from' },
  { name: 'env_file', service: 'env_file: /etc/environment', power: 'bind:/etc/environment', key: 'env_file' },
  { name: 'build_outside', service: 'build: ../..', power: 'bind:{setting}', key: 'build.context' },
  {
    name: 'secret_file',
    file: 'services:\n  default:\n    image: debian\n    secrets: [s]\nsecrets:\n  s:\n    file: /etc/hostname\n',
    power: 'bind:/etc/hostname',
    where: 'secrets.s',
    key: 'file',
  },
  {
    name: 'anchor_merge',
    file: 'x-base: &base\n  privileged: true\nservices:\n  default:\n    <<: *base\n    image: debian\n',
    power: 'privileged',
    key: 'privileged',
  },
  {
    name: 'host_network',
    file: 'services:\n  default:\n    image: debian\n    networks: [h]\nnetworks:\n  h:\n    external: true\n    name: host\n',
    power: 'network_mode:host',
    where: 'networks.h',
    key: 'driver',
  },
  { name: 'extends_outside', service: 'extends: {file: /etc/compose.yml, service: x}', power: 'extends:/etc/compose.yml', key: 'extends' },
  { name: 'include_outside', file: 'include: [/etc/compose.yml]\nservices:\n  default:\n    image: debian\n', power: 'include:/etc/compose.yml', where: 'include', key: 'include' },
  {
    name: 'extends_inside',
    service: 'extends: {file: base.yml, service: root}',
    files: { 'base.yml': 'services:\n  root:\n    image: debian\n    pid: host\n' },
    power: 'pid:host',
    where: 'services.root',
    key: 'pid',
  },
];

/** Keys that look like host powers but are not: none of these is refused. */
const HARMLESS = [
  'cap_add: [CHOWN, NET_BIND_SERVICE, KILL]',
  'volumes: ["./data:/data", "named:/named", "/anon"]',
  'network_mode: "service:store"',
  'security_opt: ["no-new-privileges:true"]',
  'sysctls: ["net.ipv4.ip_forward=1"]',
  'tmpfs: [/tmp]',
  'volumes_from: [store]',
  'extra_hosts: ["host.docker.internal:host-gateway"]',
];

function composeOf(c: Pick<Case, 'service' | 'file'>): string {
  if (c.file) return c.file;
  const svc = (c.service ?? '').split('\n').map((l) => `    ${l}`).join('\n');
  return `services:\n  default:\n    image: debian\n${svc}\n  store:\n    image: busybox\nvolumes:\n  named: {}\n`;
}

/** An environment `<root>/<setting>/<name>` with one main task. */
function makeEnv(root: string, setting: string, name: string, compose: string, files: Record<string, string> = {}): string {
  const dir = join(root, setting, name);
  const codebase = join(dir, 'codebase');
  mkdirSync(join(dir, 'main_tasks', 't'), { recursive: true });
  mkdirSync(codebase, { recursive: true });
  writeFileSync(join(codebase, 'compose.yml'), compose);
  for (const [f, text] of Object.entries(files)) {
    if (text.startsWith('->')) symlinkSync(text.slice(2), join(codebase, f));
    else writeFileSync(join(codebase, f), text);
  }
  const task = join(dir, 'main_tasks', 't');
  writeFileSync(join(task, 'info.yml'), 'name: T\ntask_category: fix_bug\nshort_description: x\nscorer_description: x\ncoverage: x\ndescription:\n  file: r.md\n');
  writeFileSync(join(task, 'r.md'), 'Do it.\n');
  writeFileSync(join(task, 'scorer.sh'), '#!/bin/sh\necho C\n');
  return dir;
}

/** Compose projects on this machine (a read-only look; undefined without Docker). */
function composeProjectCount(): number | undefined {
  try {
    return execFileSync('docker', ['ps', '-a', '-q', '--filter', 'label=com.docker.compose.project'], { encoding: 'utf8', timeout: 20_000 })
      .split('\n')
      .filter(Boolean).length;
  } catch {
    return undefined;
  }
}

describe('compose host powers', () => {
  let project: string;
  let root: string;

  before(() => {
    project = realpathSync(tempDir('trust'));
    root = join(project, 'settings');
    for (const c of DANGEROUS) makeEnv(root, 'evil', c.name, composeOf(c), c.files);
    HARMLESS.forEach((service, i) => makeEnv(root, 'fine', `harmless_${i}`, composeOf({ service })));
    writeFileSync(join(project, 'ct.config.yml'), stringify({ settings_dir: 'settings' }));
  });

  after(removeTempDirs);

  const expected = (c: Case) => c.power.replace('{root}', root).replace('{setting}', join(root, 'evil'));

  for (const c of DANGEROUS) {
    test(`${c.name}: ${c.power} is found at ${c.where ?? 'services.default'}.${c.key}`, () => {
      const dir = join(root, 'evil', c.name);
      const powers = composeHostPowers(join(dir, 'codebase', 'compose.yml'), dir);
      assert.ok(
        powers.some((p) => p.power === expected(c) && p.key === c.key && p.where === (c.where ?? 'services.default')),
        JSON.stringify(powers),
      );
    });
  }

  test('harmless keys (Docker default capabilities, binds inside the environment, same-project services) are not powers', () => {
    HARMLESS.forEach((service, i) => {
      const dir = join(root, 'fine', `harmless_${i}`);
      assert.deepEqual(composeHostPowers(join(dir, 'codebase', 'compose.yml'), dir), [], service);
    });
  });

  test('the example settings give no host powers', () => {
    const catalog = new SettingsCatalog(EXAMPLE_SETTINGS, new Map());
    for (const [s, e] of catalog.listEnvironments()) assert.deepEqual(catalog.load(s, e).hostPowers, [], `${s}:${e}`);
  });

  test('trust covers exactly its powers; bind:PATH covers what is under PATH, a relative PATH is from the setting', () => {
    const setting = join(root, 'evil');
    assert.ok(isTrusted('privileged', ['privileged'], setting));
    assert.ok(!isTrusted('cap_add:SYS_ADMIN', ['cap_add:NET_ADMIN', 'privileged'], setting));
    assert.ok(isTrusted('bind:/var/data/x', ['bind:/var/data'], setting));
    assert.ok(isTrusted('bind:/var/data', ['bind:/var/data'], setting));
    assert.ok(!isTrusted('bind:/var/database', ['bind:/var/data'], setting));
    assert.ok(!isTrusted('bind:/var', ['bind:/var/data'], setting));
    assert.ok(isTrusted(`bind:${join(setting, 'shared', 'a')}`, ['bind:shared'], setting));
    assert.ok(!isTrusted('docker_socket', ['bind:/'], setting), 'the Docker socket needs its own trust');
    assert.ok(!isTrusted('bind:${HOME}:/home', ['bind:/'], setting), 'a path from a variable matches only its own text');
    assert.ok(isTrusted('bind:${HOME}:/home', ['bind:${HOME}:/home'], setting));
  });

  test('the catalog refuses an untrusted environment and loads a trusted one; the run names what it trusted', () => {
    const untrusted = new SettingsCatalog(root, new Map());
    assert.throws(() => untrusted.load('evil', 'privileged'), (e: unknown) => e instanceof ConfigError && /services\.default\.privileged: privileged/.test(e.message));
    const trusted = new SettingsCatalog(root, new Map([['evil', ['privileged', 'bind:/etc']]]));
    const envs = [trusted.load('evil', 'privileged'), trusted.load('evil', 'bind_short')];
    assert.deepEqual(trustedPowers(envs), { evil: ['bind:/etc', 'privileged'] });
    assert.deepEqual(trustedLines(trustedPowers(envs)), ['trusted: setting evil may give its sandboxes bind:/etc, privileged (settings.evil.trust in ct.config.yml)']);
    // Trust for one power is not trust for another.
    assert.throws(() => trusted.load('evil', 'cap_all'), /cap_add:ALL/);
  });

  test('ct.config.yml: trust takes known powers only, and an entry may set trust without a repo', () => {
    const dir = tempDir('trust-config');
    writeFileSync(join(dir, 'ct.config.yml'), stringify({ settings: { evil: { trust: ['privileged', 'bind:/var/data'] } } }));
    assert.deepEqual(loadConfig({ cwd: dir, env: {} }).settings.evil?.trust, ['privileged', 'bind:/var/data']);
    writeFileSync(join(dir, 'ct.config.yml'), stringify({ settings: { evil: { trust: ['netmode:host'] } } }));
    assert.throws(() => loadConfig({ cwd: dir, env: {} }), (e: unknown) => e instanceof ConfigError && /settings\.evil\.trust\.0.*ct\.config\.yml.*not a host power/.test(e.message));
  });

  test('ct envs validate names the file, service, key and power of every case and exits 2', async () => {
    const r = await ct(project, ['envs', 'validate']);
    assert.equal(r.code, 2, show(r));
    for (const c of DANGEROUS) {
      const block = r.stdout.split(/\n(?=\S)/).find((b) => b.startsWith(`evil:${c.name}:`));
      assert.ok(block, `no report for ${c.name}\n${show(r)}`);
      const file = c.name === 'extends_inside' ? 'codebase/base.yml' : 'codebase/compose.yml';
      assert.ok(block.includes(`${file}: ${c.where ?? 'services.default'}.${c.key}: ${expected(c)} gives the sandbox power over the host`), `${c.name}:\n${block}`);
      assert.match(block, /settings: \{evil: \{trust: \[/);
    }
    for (let i = 0; i < HARMLESS.length; i++) assert.match(r.stdout, new RegExp(`fine:harmless_${i}: ok`));
  });

  test('with the matching trust in ct.config.yml, ct envs validate passes', async () => {
    const dir = tempDir('trusted');
    makeEnv(join(dir, 'settings'), 'evil', 'box', composeOf({ service: 'privileged: true\nnetwork_mode: host\nvolumes: ["/var/data:/data", "/var/run/docker.sock:/sock"]' }));
    writeFileSync(join(dir, 'ct.config.yml'), stringify({ settings_dir: 'settings', settings: { evil: { trust: ['privileged', 'network_mode:host', 'bind:/var', 'docker_socket'] } } }));
    const ok = await ct(dir, ['envs', 'validate']);
    assert.equal(ok.code, 0, show(ok));
    assert.match(ok.stdout, /evil:box: ok/);
  });

  test('ct run eval over refused environments exits 2 before any sandbox: no log, no container', async () => {
    const logs = join(project, 'logs');
    const before = composeProjectCount();
    for (const name of ['privileged', 'bind_long', 'socket_short', 'bind_symlink', 'include_outside']) {
      const r = await ct(project, ['run', 'eval', '-e', `evil:${name}`, '--policy', 'test', '--log-dir', logs]);
      assert.equal(r.code, 2, `${name}\n${show(r)}`);
      const c = DANGEROUS.find((d) => d.name === name)!;
      assert.match(r.stderr, new RegExp(`environment evil:${name} .*refused before any sandbox starts`), show(r));
      assert.ok(r.stderr.includes(`codebase/compose.yml: ${c.where ?? 'services.default'}.${c.key}: ${expected(c)}`), show(r));
      assert.match(r.stderr, /trust: \[/);
      assert.ok(!existsSync(logs) || readdirSync(logs).length === 0, `${name}: something was written in the log dir`);
    }
    assert.equal(composeProjectCount(), before, 'a compose container was created');
  });

  test('a trusted run prints what it trusted, one line per setting, before anything starts', async () => {
    const dir = tempDir('trusted-run');
    makeEnv(join(dir, 'settings'), 'evil', 'box', composeOf({ service: 'privileged: true\ncap_add: [SYS_PTRACE]' }));
    writeFileSync(join(dir, 'ct.config.yml'), stringify({ settings_dir: 'settings', settings: { evil: { trust: ['privileged', 'cap_add:SYS_PTRACE', 'pid:host'] } } }));
    // Too many sample runs: refused right after the selection is loaded, so no sandbox starts.
    const r = await ct(dir, ['run', 'eval', '-e', 'box', '--policy', 'test', '--epochs', '100001', '--log-dir', join(dir, 'logs')]);
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /^trusted: setting evil may give its sandboxes cap_add:SYS_PTRACE, privileged \(settings\.evil\.trust in ct\.config\.yml\)$/m, show(r));
  });
});

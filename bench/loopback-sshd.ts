/**
 * An OpenSSH server on a loopback port with its own config, host key and one client key, so
 * this machine's Docker Engine can be driven "remotely" over SSH. Needs /usr/sbin/sshd and
 * ssh-keygen (Debian's openssh-server / openssh-client).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';

export const SSHD = '/usr/sbin/sshd';

export interface LoopbackSshd {
  host: string;
  port: number;
  user: string;
  /** Private key the server accepts. */
  keyFile: string;
  /** `ssh` options that reach this server non-interactively. */
  sshOptions: string[];
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = connect(port, '127.0.0.1');
    c.once('data', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
    c.setTimeout(1000, () => {
      c.destroy();
      resolve(false);
    });
  });
}

/** Why a loopback sshd cannot run here, or null when it can. */
export function sshdUnavailable(): string | null {
  for (const bin of [SSHD, '/usr/bin/ssh-keygen', '/usr/bin/ssh']) if (!existsSync(bin)) return `${bin} is not installed`;
  return null;
}

export async function startLoopbackSshd(dir: string): Promise<LoopbackSshd> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const hostKey = join(dir, 'host_ed25519');
  const keyFile = join(dir, 'id_ed25519');
  for (const f of [hostKey, keyFile]) execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', f]);
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(`${keyFile}.pub`), { mode: 0o600 });
  const port = await freePort();
  const user = userInfo().username;
  const config = join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      'StrictModes no',
      'UsePAM no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      // Room for a client that multiplexes many channels on one connection.
      'MaxSessions 64',
      'MaxStartups 64',
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  // Privilege separation needs this folder when sshd starts as root.
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const child: ChildProcess = spawn(SSHD, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sshd did not start on 127.0.0.1:${port}: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    host: '127.0.0.1',
    port,
    user,
    keyFile,
    sshOptions: [
      '-i',
      keyFile,
      '-p',
      String(port),
      '-o',
      'BatchMode=yes',
      '-o',
      'StrictHostKeyChecking=no',
      '-o',
      'UserKnownHostsFile=/dev/null',
      '-o',
      'LogLevel=ERROR',
    ],
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

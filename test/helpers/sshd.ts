import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface SshdOptions {
  /** Port to listen on (default: a free loopback port). */
  port?: number;
  /** Public key lines accepted through an AuthorizedKeysFile (default: a fresh client key). */
  authorizedKeys?: string[];
  /**
   * An AuthorizedKeysCommand instead of a file, as a shell script body; it gets the user name
   * as $1 and prints the keys to accept (how EC2 Instance Connect works on an instance).
   */
  authorizedKeysScript?: string;
  /** sshd's MaxSessions (default 10, as sshd's own default). */
  maxSessions?: number;
}

export interface Sshd {
  host: '127.0.0.1';
  port: number;
  user: string;
  /** A private key sshd accepts (when no authorizedKeysScript was given). */
  clientKeyFile: string;
  clientPublicKey: string;
  /** The host's public key line (`ssh-ed25519 AAAA...`). */
  hostPublicKey: string;
  /** Sessions' $HOME (a temporary folder, so remote state stays out of the real home). */
  home: string;
  dir: string;
  /** What sshd printed (for failure messages). */
  log(): string;
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

function keygen(file: string): string {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'ct-test', '-f', file]);
  return readFileSync(`${file}.pub`, 'utf8').trim();
}

/**
 * Starts OpenSSH's sshd in the foreground on a loopback port with its own host key and config
 * (as root in CI: root logins by key only; as another user: that user's logins). Docker on this
 * machine is then a "remote" Docker host reached through SSH.
 */
export async function startSshd(options: SshdOptions = {}): Promise<Sshd> {
  const dir = mkdtempSync(join(tmpdir(), 'ct-sshd-'));
  const home = join(dir, 'home');
  mkdirSync(home);
  const hostKey = join(dir, 'host_ed25519');
  const hostPublicKey = keygen(hostKey);
  const clientKeyFile = join(dir, 'client_ed25519');
  const clientPublicKey = keygen(clientKeyFile);
  const port = options.port ?? (await freePort());
  const lines = [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${hostKey}`,
    `PidFile ${join(dir, 'sshd.pid')}`,
    'PermitRootLogin prohibit-password',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'StrictModes no',
    `MaxSessions ${options.maxSessions ?? 10}`,
    'MaxStartups 100',
    `SetEnv HOME=${home}`,
  ];
  if (options.authorizedKeysScript !== undefined) {
    const script = join(dir, 'authorized-keys.sh');
    writeFileSync(script, options.authorizedKeysScript, { mode: 0o755 });
    // sshd checks the command's own path (/bin/sh) for safe ownership, not the script's folder.
    lines.push('AuthorizedKeysFile none', `AuthorizedKeysCommand /bin/sh ${script} %u`, `AuthorizedKeysCommandUser ${userInfo().username}`);
  } else {
    const file = join(dir, 'authorized_keys');
    writeFileSync(file, `${(options.authorizedKeys ?? [clientPublicKey]).join('\n')}\n`, { mode: 0o600 });
    lines.push(`AuthorizedKeysFile ${file}`);
  }
  const config = join(dir, 'sshd_config');
  writeFileSync(config, `${lines.join('\n')}\n`);
  mkdirSync('/run/sshd', { recursive: true });
  const child: ChildProcess = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (c: Buffer) => (log += c.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sshd did not start within 10 s:\n${log}`)), 10_000);
    const check = () => {
      if (/Server listening/.test(log)) {
        clearTimeout(timer);
        child.stderr!.off('data', check);
        resolve();
      }
    };
    child.stderr!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sshd exited with ${code}:\n${log}`));
    });
  });
  return {
    host: '127.0.0.1',
    port,
    user: userInfo().username,
    clientKeyFile,
    clientPublicKey,
    hostPublicKey,
    home,
    dir,
    log: () => log,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await gone;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

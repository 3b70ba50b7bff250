import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import ssh2 from 'ssh2';
import type { AgentAuthMethod, Client as SshClient, ClientChannel, ConnectConfig, PublicKeyAuthMethod } from 'ssh2';
import { CancelledError, CtError, SandboxUnavailableError, errorMessage } from '../errors.js';
import type { CommandRunner, RunOptions, RunResult, RunningProcess } from './command-runner.js';
import { KnownHosts, knownHostName } from './known-hosts.js';
import { commandLine } from './shell-quote.js';
import { describeAuth, type SshAuth } from './ssh-auth.js';
import { TailBuffer } from './tail-buffer.js';

const { Client } = ssh2;

const DEFAULT_MAX_OUTPUT = 10 * 1024 * 1024;
/** How long a connection whose sshd refused a session is used with fewer slots. */
const SESSION_REFUSED_BACKOFF_MS = 2_000;
/** Refused session opens tolerated for one call (each moves to another connection) before giving up. */
const MAX_SESSION_REFUSALS = 20;
/** After a kill, how long to wait for the remote side to report the exit before giving up on it. */
const KILL_GRACE_MS = 3_000;
/** Host key algorithms ssh2 offers, most preferred first (its own default order). */
const HOST_KEY_ALGORITHMS = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'rsa-sha2-512',
  'rsa-sha2-256',
  'ssh-rsa',
];

export interface SshRunnerOptions {
  host: string;
  /** Default 22. */
  port?: number;
  username: string;
  auth: SshAuth;
  knownHosts: KnownHosts;
  /** Name the host key is recorded under (like OpenSSH's HostKeyAlias); default `[host]:port`. */
  hostKeyAlias?: string;
  /** SSH-level keepalive every this many ms (default 15 000); 4 unanswered ones drop the connection. */
  keepaliveIntervalMs?: number;
  /** Limit for the TCP connect plus handshake (default 20 000 ms). */
  readyTimeoutMs?: number;
  /**
   * Channels (commands, long-lived programs) per connection. sshd refuses more than its
   * `MaxSessions` (default 10) at once, so past this a further connection is opened.
   */
  maxSessionsPerConnection?: number;
  /** Connections to the host at most (default 16); further channels wait for a free slot. */
  maxConnections?: number;
  /** Runs before each new connection, e.g. to push a short-lived key (EC2 Instance Connect). */
  beforeConnect?: () => Promise<void>;
}

/** A connection and how many of its session slots are in use. */
interface Connection {
  client: SshClient;
  open: number;
  capacity: number;
  alive: boolean;
}

/** The SSH transport failed (as opposed to the remote program failing). */
export class SshConnectionError extends SandboxUnavailableError {}

/**
 * Runs programs on a remote host over SSH (the `ssh2` library). Every command, long-lived
 * program and file transfer is a channel on one persistent connection, so a call costs a
 * channel open (one round trip) instead of a TCP connect, key exchange and login. A second
 * connection is opened only when the first has as many channels as sshd allows (MaxSessions).
 *
 * A connection that drops between calls is re-established on the next call (once per call);
 * a command whose connection drops while it runs fails with SshConnectionError, since it is
 * not known whether it ran. Host keys are checked against ct's known-hosts file (trust on first use).
 * The remote login shell must be a POSIX shell (sh, bash, dash, zsh), as on any Docker host.
 */
export class SshRunner implements CommandRunner {
  readonly target: string;
  /** A private folder on the remote host for this process, created on first connection. */
  readonly scratchDir = `/tmp/ct-${randomBytes(6).toString('hex')}`;
  private readonly conns: Connection[] = [];
  private connecting?: Promise<Connection>;
  private readonly waiters: Array<() => void> = [];
  private home?: string;
  private closed = false;
  private firstConnected = false;

  constructor(private readonly options: SshRunnerOptions) {
    const port = options.port ?? 22;
    this.target = `ssh://${options.username}@${options.host.includes(':') ? `[${options.host}]` : options.host}${port === 22 ? '' : `:${port}`}`;
  }

  private get port(): number {
    return this.options.port ?? 22;
  }

  /** Opens the first connection now (instead of on the first call); throws with what went wrong. */
  async connect(): Promise<void> {
    if (this.conns.some((c) => c.alive)) return;
    await this.newConnection();
  }

  /** The remote user's home directory. */
  async homeDir(): Promise<string> {
    if (this.home) return this.home;
    const r = await this.run(['sh', '-c', 'printf %s "$HOME"'], { timeoutMs: 30_000 });
    if (r.code !== 0 || !r.stdout.length) throw new SshConnectionError(`cannot read $HOME on ${this.target}`);
    this.home = r.stdout.toString('utf8');
    return this.home;
  }

  /** Number of live connections (for tests and benchmarks). */
  get connectionCount(): number {
    return this.conns.filter((c) => c.alive).length;
  }

  /** Drops every connection without removing the scratch folder (the next call reconnects). */
  disconnect(): void {
    for (const c of this.conns.splice(0)) {
      c.alive = false;
      c.client.end();
    }
    this.wake();
  }

  /** Removes the scratch folder and closes the connections; the runner is unusable afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.conns.some((c) => c.alive)) {
      await this.run(['rm', '-rf', this.scratchDir], { timeoutMs: 10_000 }).catch(() => {});
    }
    this.closed = true;
    this.disconnect();
  }

  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    const r = await this.run(['sh', '-c', 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', 'sh', path], {
      input: data,
      timeoutMs: 120_000,
    });
    if (r.code !== 0) throw new SshConnectionError(`writing ${path} on ${this.target} failed: ${r.stderr.toString('utf8').trim()}`);
  }

  async removeFile(path: string): Promise<void> {
    await this.run(['rm', '-f', '--', path], { timeoutMs: 30_000 });
  }

  async run(argv: string[], options: RunOptions = {}): Promise<RunResult> {
    const line = PID_LINE + commandLine(argv, options.env);
    const limit = options.maxOutput ?? DEFAULT_MAX_OUTPUT;
    const out = new TailBuffer(limit);
    const err = new TailBuffer(limit);
    const pid = new PidLine((c) => err.push(c));
    const state = { code: null as number | null, gotExit: false, closed: false, onClose: () => {} };
    // Listeners go on inside the channel-open callback: a quick program's output, exit status
    // and close can arrive in the same packets as the open confirmation.
    const { channel, release } = await this.openChannel(line, options.signal, (ch) => {
      ch.on('data', (c: Buffer) => out.push(c));
      ch.stderr.on('data', (c: Buffer) => pid.push(c));
      ch.on('exit', (c: number | null) => {
        state.gotExit = true;
        state.code = typeof c === 'number' ? c : null;
      });
      ch.on('error', () => {
        // Writes after the program exited; the exit status tells the story.
      });
      ch.on('close', () => {
        state.closed = true;
        state.onClose();
      });
      if (options.input !== undefined) ch.end(Buffer.from(options.input));
      else ch.end();
    });
    return new Promise<RunResult>((resolve, reject) => {
      let timedOut = false;
      let killed = false;
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      let graceTimer: NodeJS.Timeout | undefined;
      const finish = () => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        if (graceTimer) clearTimeout(graceTimer);
        options.signal?.removeEventListener('abort', kill);
        release();
        pid.flush();
        if (!state.gotExit && !killed) {
          return reject(new SshConnectionError(`the connection to ${this.target} dropped while running ${argv[0]}`));
        }
        resolve({
          code: killed ? null : state.code,
          stdout: out.toBuffer(),
          stderr: err.toBuffer(),
          timedOut,
          stdoutTruncated: out.truncated,
          stderrTruncated: err.truncated,
          stdoutDropped: out.dropped,
          stderrDropped: err.dropped,
        });
      };
      const kill = () => {
        if (killed || settled) return;
        killed = true;
        this.kill(channel, pid);
        // If the host never answers, stop waiting after a grace.
        graceTimer = setTimeout(finish, KILL_GRACE_MS);
      };
      state.onClose = finish;
      if (state.closed) return finish();
      if (options.timeoutMs !== undefined) {
        timer = setTimeout(() => {
          timedOut = true;
          kill();
        }, options.timeoutMs);
      }
      if (options.signal?.aborted) kill();
      else options.signal?.addEventListener('abort', kill, { once: true });
    });
  }

  async start(argv: string[], options: { env?: Record<string, string> } = {}): Promise<RunningProcess> {
    // The channel is one duplex stream; stdout gets its own stream so callers may end stdin
    // without touching the readable side.
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const pid = new PidLine((c) => stderr.write(c));
    let resolveExit: (code: number | null) => void = () => {};
    const exited = new Promise<number | null>((r) => (resolveExit = r));
    let releaseSlot = () => {};
    let closed = false;
    let killed = false;
    const { channel, release } = await this.openChannel(PID_LINE + commandLine(argv, options.env), undefined, (ch) => {
      let code: number | null = null;
      ch.pipe(stdout);
      ch.stderr.on('data', (c: Buffer) => pid.push(c));
      ch.stderr.on('end', () => {
        pid.flush();
        stderr.end();
      });
      ch.on('exit', (c: number | null) => {
        code = typeof c === 'number' ? c : null;
      });
      ch.on('error', () => {});
      ch.on('close', () => {
        closed = true;
        releaseSlot();
        if (!stderr.writableEnded) stderr.end();
        resolveExit(killed ? null : code);
      });
    });
    releaseSlot = release;
    if (closed) release();
    const kill = () => {
      if (killed || closed) return;
      killed = true;
      this.kill(channel, pid);
    };
    return { stdin: channel, stdout, stderr, exited, kill };
  }

  /**
   * Kills a channel's program and closes the channel. Two ways, because neither works
   * everywhere: the SSH `signal` request (sshd honours it only for sessions under privilege
   * separation, i.e. not for root logins), and `kill` of the program's process group from
   * another channel (the group id is the pid the command line printed first).
   */
  private kill(channel: ClientChannel, pid: PidLine): void {
    signalKill(channel);
    pid.whenKnown((p) => {
      void this.run(['sh', '-c', 'kill -KILL "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null; true', 'sh', String(p)], {
        timeoutMs: 10_000,
      }).catch(() => {});
    });
    channel.close();
  }

  /**
   * Opens an exec channel on a connection with a free session slot. A connection found dead
   * is replaced once; sshd refusing the session (its MaxSessions) lowers that connection's
   * capacity and moves on to another connection.
   */
  private async openChannel(
    line: string,
    signal: AbortSignal | undefined,
    attach: (channel: ClientChannel) => void,
  ): Promise<{ channel: ClientChannel; release: () => void }> {
    let reconnected = false;
    let refusals = 0;
    for (;;) {
      if (this.closed) throw new SshConnectionError(`the SSH connection to ${this.target} is closed`);
      if (signal?.aborted) throw new CancelledError();
      const conn = await this.slot(reconnected);
      conn.open++;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        conn.open--;
        this.wake();
      };
      try {
        const channel = await new Promise<ClientChannel>((resolve, reject) => {
          try {
            conn.client.exec(line, (err, ch) => {
              if (err) return reject(err);
              attach(ch);
              resolve(ch);
            });
          } catch (e) {
            reject(e);
          }
        });
        return { channel, release };
      } catch (e) {
        release();
        const msg = errorMessage(e);
        if (/administratively prohibited|open failed/i.test(msg) && conn.alive) {
          if (++refusals > MAX_SESSION_REFUSALS) {
            throw new SshConnectionError(`${this.target} refuses to open sessions (${msg}); check sshd's MaxSessions and ForceCommand settings`);
          }
          // sshd refused a session: its MaxSessions is lower than assumed, or it has not yet
          // freed a session whose channel just closed. Use fewer slots on this connection for a
          // moment (others take the overflow), then try the full number again.
          conn.capacity = Math.max(1, conn.open);
          const full = this.options.maxSessionsPerConnection ?? 10;
          setTimeout(() => {
            conn.capacity = full;
            this.wake();
          }, SESSION_REFUSED_BACKOFF_MS).unref();
          continue;
        }
        if (!conn.alive || /not connected|no response|closed|ECONNRESET|EPIPE/i.test(msg)) {
          this.drop(conn);
          if (reconnected) throw new SshConnectionError(`lost the connection to ${this.target} and could not re-establish it: ${msg}`);
          reconnected = true;
          continue;
        }
        throw new SshConnectionError(`cannot open a channel on ${this.target}: ${msg}`);
      }
    }
  }

  /** A live connection with a free slot; a new connection when none has one (or `fresh`). */
  private async slot(fresh: boolean): Promise<Connection> {
    const max = this.options.maxConnections ?? 16;
    for (;;) {
      const free = this.conns.find((c) => c.alive && c.open < c.capacity);
      if (free && !fresh) return free;
      if (this.connecting) {
        await this.connecting.catch(() => {});
        fresh = false;
        continue;
      }
      if (this.conns.length < max || fresh) return this.newConnection();
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private drop(conn: Connection): void {
    conn.alive = false;
    const i = this.conns.indexOf(conn);
    if (i >= 0) this.conns.splice(i, 1);
    conn.client.end();
    this.wake();
  }

  private newConnection(): Promise<Connection> {
    this.connecting ??= this.establish().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async establish(): Promise<Connection> {
    await this.options.beforeConnect?.();
    const client = new Client();
    const alias = this.options.hostKeyAlias ?? knownHostName(this.options.host, this.port);
    let hostKeyError: Error | undefined;
    const known = this.options.knownHosts.knownTypes(alias);
    const serverHostKey = [...known.filter((t) => HOST_KEY_ALGORITHMS.includes(t)), ...HOST_KEY_ALGORITHMS.filter((t) => !known.includes(t))];
    const config: ConnectConfig = {
      host: this.options.host,
      port: this.port,
      username: this.options.username,
      readyTimeout: this.options.readyTimeoutMs ?? 20_000,
      keepaliveInterval: this.options.keepaliveIntervalMs ?? 15_000,
      keepaliveCountMax: 4,
      algorithms: { serverHostKey: serverHostKey as NonNullable<ConnectConfig['algorithms']>['serverHostKey'] },
      hostVerifier: (key: Buffer) => {
        try {
          this.options.knownHosts.verify(alias, key);
          return true;
        } catch (e) {
          hostKeyError = e as Error;
          return false;
        }
      },
      authHandler: this.authMethods(),
    };
    // ssh2 may emit 'error' after 'close' (e.g. a host hanging up mid-handshake); an error
    // without a listener would crash the process, and the outcome is handled below anyway.
    client.on('error', () => {});
    const conn: Connection = { client, open: 0, capacity: this.options.maxSessionsPerConnection ?? 10, alive: true };
    await new Promise<void>((resolve, reject) => {
      const onError = (e: Error) => {
        cleanup();
        client.end();
        reject(this.connectError(hostKeyError ?? e));
      };
      const onClose = () => {
        cleanup();
        reject(this.connectError(hostKeyError ?? new Error('the host closed the connection during the handshake')));
      };
      const onReady = () => {
        cleanup();
        client.setNoDelay(true);
        resolve();
      };
      const cleanup = () => {
        client.off('error', onError);
        client.off('close', onClose);
        client.off('ready', onReady);
      };
      client.on('error', onError);
      client.on('close', onClose);
      client.on('ready', onReady);
      client.connect(config);
    });
    const lost = () => {
      if (!conn.alive) return;
      this.drop(conn);
    };
    client.on('error', lost);
    client.on('close', lost);
    client.on('end', lost);
    if (this.closed) {
      client.end();
      throw new SshConnectionError(`the SSH connection to ${this.target} is closed`);
    }
    this.conns.push(conn);
    if (!this.firstConnected) {
      this.firstConnected = true;
      await this.run(['mkdir', '-p', '-m', '700', this.scratchDir], { timeoutMs: 30_000 }).catch(() => {});
    }
    return conn;
  }

  private authMethods(): Array<AgentAuthMethod | PublicKeyAuthMethod> {
    const username = this.options.username;
    const methods: Array<AgentAuthMethod | PublicKeyAuthMethod> = [];
    if (this.options.auth.agent) methods.push({ type: 'agent' as const, username, agent: this.options.auth.agent });
    for (const k of this.options.auth.keys) methods.push({ type: 'publickey' as const, username, key: k.key });
    return methods;
  }

  private connectError(e: Error): Error {
    if (e instanceof CtError) return e;
    const msg = e.message;
    const level = (e as { level?: string }).level;
    if (level === 'client-authentication' || /authentication methods failed/i.test(msg)) {
      return new SshConnectionError(
        `${this.target} did not accept any key ct offered (tried ${describeAuth(this.options.auth)}). ` +
          'Add your public key to the host\'s ~/.ssh/authorized_keys, load the right key into ssh-agent, or pass --ssh-key FILE.',
      );
    }
    if (/ECONNREFUSED/.test(msg)) {
      return new SshConnectionError(`${this.target} refused the connection (is sshd running and the port right?)`);
    }
    if (/ENOTFOUND|EAI_AGAIN/.test(msg)) return new SshConnectionError(`cannot resolve the host name of ${this.target}`);
    if (/timed out|ETIMEDOUT/i.test(msg)) {
      return new SshConnectionError(`connecting to ${this.target} timed out (a firewall or security group may block port ${this.port})`);
    }
    return new SshConnectionError(`cannot connect to ${this.target}: ${msg}`);
  }
}

/**
 * Printed to stderr before the program starts: the pid of the login shell, which `exec`
 * turns into the program and which sshd made a session (and process group) leader.
 */
const PID_LINE = `printf '\\001ct-pid:%s\\n' $$ >&2; `;
const PID_MARK = Buffer.from('\x01ct-pid:');

/** Takes the PID_LINE off the front of stderr and passes the rest on unchanged. */
class PidLine {
  pid?: number;
  private head: Buffer | undefined = Buffer.alloc(0);
  private readonly callbacks: Array<(pid: number) => void> = [];

  constructor(private readonly sink: (chunk: Buffer) => void) {}

  push(chunk: Buffer): void {
    if (!this.head) return this.sink(chunk);
    this.head = Buffer.concat([this.head, chunk]);
    const at = this.head.indexOf(PID_MARK);
    const nl = at >= 0 ? this.head.indexOf(0x0a, at) : -1;
    if (nl >= 0) {
      this.pid = Number(this.head.subarray(at + PID_MARK.length, nl).toString('latin1'));
      const rest = Buffer.concat([this.head.subarray(0, at), this.head.subarray(nl + 1)]);
      this.head = undefined;
      if (rest.length) this.sink(rest);
      for (const cb of this.callbacks.splice(0)) cb(this.pid);
    } else if (this.head.length > 4096) this.flush();
  }

  /** Passes on whatever is held back (the marker never came). */
  flush(): void {
    if (!this.head) return;
    const held = this.head;
    this.head = undefined;
    if (held.length) this.sink(held);
  }

  whenKnown(cb: (pid: number) => void): void {
    if (this.pid !== undefined) cb(this.pid);
    else if (this.head) this.callbacks.push(cb);
  }
}

/**
 * Sends the SSH `signal` request for SIGKILL. ssh2's `signal()` only sends while the channel
 * is writable, but stdin is usually closed right after a command starts, so the request is
 * written through ssh2's protocol object (ssh2 1.x) in that case.
 */
function signalKill(channel: ClientChannel): void {
  const ch = channel as unknown as {
    writable: boolean;
    outgoing?: { id: number; state: string };
    _client?: { _protocol?: { signal?: (id: number, sig: string) => void } };
  };
  try {
    if (ch.writable) channel.signal('KILL');
    else if (ch.outgoing?.state === 'open') ch._client?._protocol?.signal?.(ch.outgoing.id, 'KILL');
  } catch {
    // The channel is already closing.
  }
}

import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { TailBuffer } from '../../host/tail-buffer.js';
import { CHANNEL_AGENT } from './agent-script.js';
import { INLINE_SCRIPT_LIMIT } from './channel-command.js';
import { FrameParser, type AgentFrame } from './frame-parser.js';
import { NATIVE_BOOT, nativeAgentBinary, type ExecAgentKind } from './native-agent.js';
import type { ChannelCommand, ChannelHost, ChannelOutcome, ChannelProcess, ChannelRunOptions } from './types.js';

/** How long the agent may take to say hello (a `docker exec` start plus a few probes). */
const START_TIMEOUT_MS = 30_000;
/**
 * After a command exits, how long background processes it left holding stdout/stderr may keep
 * the output open before the readers are cut off. Docker Engine waits about as long before it
 * ends a `docker exec` whose streams are still open; the processes then see a closed pipe.
 */
const DRAIN_GRACE_MS = 2_000;
/**
 * Once a kill (at a timeout, or past the drain grace) has been delivered, how long the answer
 * may take before the channel is abandoned. Counted from the kill's own `docker exec` returning,
 * so a slow Docker daemon does not pass for a stuck agent.
 */
const KILL_BACKSTOP_MS = 5_000;
/** How long the agent may take to connect to the host's socket before the channel stays on its streams. */
const DIRECT_TIMEOUT_MS = 2_000;
/** The longest path bind() takes for a unix socket (sun_path less its NUL). */
const MAX_SOCKET_PATH = 107;

/**
 * Channel lifecycle:
 *   starting -> idle     the agent said hello
 *   starting -> closed   it refused (image lacks what it needs) or the process failed
 *   idle     -> busy     run()
 *   busy     -> idle     the answer arrived
 *   any      -> closed   close(), the process died, or a stream went out of step
 */
export type ChannelState = 'starting' | 'idle' | 'busy' | 'closed';

/** Why a channel could not start: `image` when the agent refused (retrying will not help). */
export class ChannelStartError extends Error {
  constructor(
    message: string,
    readonly kind: 'image' | 'exec',
  ) {
    super(message);
  }
}

interface InFlight {
  id: number;
  resolve: (o: ChannelOutcome) => void;
  stdout: TailBuffer;
  /** Stdout bytes received for this call (the stream is this call's alone while it runs). */
  received: number;
  started?: { pid: number; readers: [number, number] };
  exitCode?: number;
  /** The answer, held until its stdout bytes have all arrived. */
  result?: Extract<AgentFrame, { type: 'result' }>;
  timedOut: boolean;
  timers: NodeJS.Timeout[];
  killPending: boolean;
}

/**
 * One agent inside one container, running one command at a time. Built on
 * CommandRunner.start, so it works the same against a local or a remote Docker host.
 */
export class ExecChannel {
  state: ChannelState = 'starting';
  /** Why the channel closed, for notices; `closed` when close() was called. */
  closeReason = '';
  private proc?: ChannelProcess;
  /** The direct connection to the agent, once it carries the channel (see tryDirect). */
  private sock?: Socket;
  /**
   * A direct connection being set up: its tokens, whether the D request went out and the agent
   * declined it (`D -`, at most once), how to end the attempt while it runs, and how to remove
   * its socket (through the agent's /proc/<pid>/cwd: only while the agent lives).
   */
  private attempt?: { agentToken: string; hostToken: string; offered: boolean; declined: boolean; done?: (ok: boolean) => void; unlink?: () => void };
  private readonly parser = new FrameParser();
  private nextId = 1;
  private current?: InFlight;
  /** The agent's current output readers, to clean up after an agent that was killed. */
  private readers?: [number, number];
  private hello?: { resolve: () => void; reject: (e: ChannelStartError) => void };
  private readonly closedListeners: (() => void)[] = [];
  /** Which agent answered the hello. */
  agent: ExecAgentKind = 'sh';
  /**
   * How requests and answers travel: `stream`, the docker exec's own streams (through
   * containerd's shim and dockerd), or `direct`, a unix socket this process listens on in the
   * agent's directory, which the agent connected to (a local engine, where this process may
   * enter the container's files).
   */
  transport: 'stream' | 'direct' = 'stream';

  private constructor(
    private readonly host: ChannelHost,
    readonly user: string | undefined,
    private readonly fileStdout: boolean,
    private readonly wanted: ExecAgentKind,
  ) {}

  /**
   * Starts an agent and waits for its hello. `fileStdout` forces the sh agent with stdout
   * through a file; `agent` is the native one by default, which falls back to sh by itself.
   */
  static async start(host: ChannelHost, user: string | undefined, fileStdout = false, agent: ExecAgentKind = 'native'): Promise<ExecChannel> {
    const ch = new ExecChannel(host, user, fileStdout, agent);
    await ch.open();
    return ch;
  }

  /** Called once when the channel closes for any reason. */
  onClosed(listener: () => void): void {
    if (this.state === 'closed') listener();
    else this.closedListeners.push(listener);
  }

  private async open(): Promise<void> {
    const binary = this.wanted === 'native' && !this.fileStdout ? nativeAgentBinary() : undefined;
    const cmd = ['sh', '-c', NATIVE_BOOT + CHANNEL_AGENT, 'sh', this.fileStdout ? 'file' : 'stream'];
    if (binary) cmd.push(String(binary.length), String(DRAIN_GRACE_MS));
    const argv = [this.host.docker, 'exec', '-i', ...(this.user ? ['--user', this.user] : []), this.host.containerId, ...cmd];
    const ready = new Promise<void>((resolve, reject) => (this.hello = { resolve, reject }));
    // Awaited below once the process runs; a start that fails before that rejects it unawaited.
    ready.catch(() => {});
    // Docker's own complaints (no such user, container gone) arrive on the control stream too.
    const early = new TailBuffer(2048);
    let proc: ChannelProcess;
    try {
      proc = await this.startProcess(cmd, argv);
    } catch (e) {
      this.shut(`could not start docker exec: ${(e as Error).message}`);
      throw new ChannelStartError(this.closeReason, 'exec');
    }
    this.proc = proc;
    // Nothing else is sent before the hello (the boot script may read ahead of the binary).
    if (binary) proc.stdin.write(binary);
    proc.stdout.on('data', (c: Buffer) => this.onStdout(c));
    proc.stderr.on('data', (c: Buffer) => {
      if (this.sock) return this.fail(`bytes on the exec's stderr while the agent answers on its socket: ${JSON.stringify(c.subarray(0, 60).toString('latin1'))}`);
      if (this.state === 'starting') early.push(c);
      this.onControl(c);
    });
    void proc.exited.then((code) => {
      const said = this.state === 'starting' ? early.toBuffer().toString('utf8').trim().split('\n').slice(-2).join(' | ') : '';
      this.shut(`agent exited (${code ?? 'killed'})${said ? `: ${said}` : ''}`);
    });
    const timer = setTimeout(() => {
      // shut() first: it removes a direct attempt's socket while the agent still lives.
      this.shut(`agent did not start within ${START_TIMEOUT_MS / 1000} s`);
      proc.kill();
    }, START_TIMEOUT_MS);
    try {
      await ready;
    } finally {
      clearTimeout(timer);
    }
  }

  /** The agent's `docker exec`: through the engine's API where the host offers it, else the CLI. */
  private async startProcess(cmd: string[], argv: string[]): Promise<ChannelProcess> {
    if (this.host.startExec) {
      try {
        return await this.host.startExec(cmd, this.user);
      } catch (e) {
        // The daemon's own refusal (no such container, no such user) is the answer; only a
        // socket that cannot be reached sends the start to the CLI.
        if ((e as Error).message.startsWith('Error response from daemon:')) throw e;
      }
    }
    return this.host.runner.start(argv);
  }

  /** Runs one command; the channel must be idle. Never throws: failures are outcomes. */
  run(command: ChannelCommand, options: ChannelRunOptions): Promise<ChannelOutcome> {
    if (this.state !== 'idle' || !this.proc) return Promise.resolve({ kind: 'not-started', reason: `channel is ${this.state}` });
    this.state = 'busy';
    const id = this.nextId++;
    return new Promise<ChannelOutcome>((resolve) => {
      const call: InFlight = {
        id,
        resolve,
        stdout: new TailBuffer(options.maxOutput),
        received: 0,
        timedOut: false,
        timers: [],
        killPending: false,
      };
      this.current = call;
      const stop = () => {
        if (call.exitCode !== undefined) return;
        if (call.started) this.killGroup(call);
        else call.killPending = true;
      };
      if (options.timeoutMs !== undefined) {
        call.timers.push(
          setTimeout(() => {
            if (call.exitCode !== undefined) return;
            call.timedOut = true;
            stop();
          }, options.timeoutMs),
        );
      }
      if (options.signal) {
        const signal = options.signal;
        if (signal.aborted) call.killPending = true;
        else {
          signal.addEventListener('abort', stop, { once: true });
          const settle = call.resolve;
          call.resolve = (o) => {
            signal.removeEventListener('abort', stop);
            settle(o);
          };
        }
      }
      let parts: Buffer[];
      if (this.agent === 'native') {
        const header = `${id} ${options.maxOutput} ${command.input.length} ${command.native.length}\n`;
        parts = [Buffer.from(header, 'latin1'), command.native];
      } else {
        const inline = command.script.length <= INLINE_SCRIPT_LIMIT;
        const header = `${id} ${options.maxOutput} ${command.input.length} ${inline ? 0 : command.script.length}\n`;
        parts = [Buffer.from(header, 'latin1'), command.script];
        if (inline) parts.push(Buffer.from('\n'));
      }
      if (command.input.length > 0) parts.push(command.input);
      (this.sock ?? this.proc!.stdin).write(Buffer.concat(parts));
    });
  }

  /** Ends the agent: it exits when its stdin closes; the docker client is killed if it lingers. */
  close(): void {
    if (this.state === 'closed') return;
    const proc = this.proc;
    this.shut('closed');
    this.sock?.end();
    if (proc) {
      proc.stdin.end();
      const t = setTimeout(() => proc.kill(), 2_000);
      t.unref();
      void proc.exited.then(() => clearTimeout(t));
    }
  }

  private onStdout(chunk: Buffer): void {
    if (this.agent === 'native' && this.state !== 'starting') return this.fail(`stdout bytes outside the control stream: ${JSON.stringify(chunk.subarray(0, 60).toString('latin1'))}`);
    this.takeStdout(chunk);
  }

  /** A call's stdout bytes, from the stdout stream (sh agent) or O frames (native agent). */
  private takeStdout(chunk: Buffer): void {
    const call = this.current;
    if (!call) {
      if (this.state !== 'closed') this.fail(`stdout bytes outside any call (${this.state}): ${JSON.stringify(chunk.subarray(0, 60).toString('latin1'))}`);
      return;
    }
    call.stdout.push(chunk);
    call.received += chunk.length;
    const expected = call.result?.stdoutSent;
    if (expected !== undefined && call.received > expected) return this.fail(`call ${call.id}: more stdout than announced`);
    if (call.result && call.received === expected) this.complete(call);
  }

  private onControl(chunk: Buffer): void {
    let frames: AgentFrame[];
    try {
      frames = this.parser.push(chunk);
    } catch (e) {
      return this.fail(`protocol error: ${(e as Error).message}`);
    }
    for (const f of frames) this.onFrame(f);
  }

  private onFrame(f: AgentFrame): void {
    if (f.type === 'noise') return; // kept in the start-up text for the message if the start fails
    if (f.type === 'hello') {
      if (this.state !== 'starting') return;
      this.agent = f.native ? 'native' : 'sh';
      if (f.mode === 'direct') {
        if (!this.sock || !this.attempt?.done) return this.fail('protocol error: a direct hello outside a direct connection');
        return this.attempt.done(true);
      }
      if (f.direct && this.proc?.hostPid && !this.attempt) {
        // Offer a socket; the channel is ready once it is set up or given up (tryDirect).
        this.attempt = { agentToken: randomBytes(16).toString('hex'), hostToken: randomBytes(16).toString('hex'), offered: false, declined: false };
        // Whatever goes wrong in setting it up leaves the channel on its streams.
        return void this.tryDirect().catch(() => (this.attempt?.done ? this.attempt.done(false) : this.ready()));
      }
      return this.ready();
    }
    if (f.type === 'direct') {
      // `D -`: the agent did not connect. It may come after the host gave up and moved on.
      if (!this.attempt?.offered || this.attempt.declined) return this.fail('protocol error: an unasked direct answer');
      this.attempt.declined = true;
      return this.attempt.done?.(false);
    }
    if (f.type === 'refused') {
      this.shut(`the image cannot run it: ${f.reason}`, 'image');
      this.proc?.kill();
      return;
    }
    const call = this.current;
    if (!call || f.id !== call.id) return this.fail(`protocol error: frame for call ${f.id}, expected ${call?.id ?? 'none'}`);
    switch (f.type) {
      case 'not-started':
        call.exitCode = -1;
        return;
      case 'stdout':
        return this.takeStdout(f.data);
      case 'started':
        call.started = { pid: f.pid, readers: f.readers };
        // The native agent has no reader processes (0 0): it ends the drain itself.
        if (f.readers[0] > 0) this.readers = f.readers;
        if (call.killPending) this.killGroup(call);
        return;
      case 'exited': {
        call.exitCode = f.code;
        if (!call.started) return;
        const readers = call.started.readers.filter((r) => r > 0).map(String);
        call.timers.push(
          readers.length > 0
            ? setTimeout(() => this.killThen(call, readers, 'output readers did not stop'), DRAIN_GRACE_MS)
            : setTimeout(() => this.abandon(call, 'the agent did not end the output drain'), DRAIN_GRACE_MS + KILL_BACKSTOP_MS),
        );
        return;
      }
      case 'result':
        call.result = f;
        // Uncounted stdout: the agent exits, and the end of the stream completes the call.
        if (f.stdoutSent === undefined) return;
        if (call.received > f.stdoutSent) return this.fail(`call ${call.id}: more stdout than announced`);
        if (call.received === f.stdoutSent) this.complete(call);
        return;
    }
  }

  private ready(): void {
    if (this.state !== 'starting') return;
    this.state = 'idle';
    this.hello?.resolve();
  }

  /**
   * Listens on a socket of its own making in the agent's directory and lets the agent connect
   * (see try_direct in ct-exec-agent.c). The host never connects to a path the container could
   * name or replace: it creates the socket through /proc/<pid>/cwd, the magic link to the agent
   * process's working directory (its private directory), under a random name; bind() makes a
   * new file and follows no symlink in its place. The first connection is the only one taken,
   * and it must send the agent's token before the host writes a byte. Any failure (no pid, no
   * access to the container's files, a timeout, a wrong or missing token, the agent's `D -`)
   * leaves the channel on its streams.
   */
  private async tryDirect(): Promise<void> {
    const attempt = this.attempt!;
    const pid = await this.proc!.hostPid!();
    if (this.state !== 'starting') return;
    const name = `ct-${randomBytes(12).toString('hex')}`;
    const path = pid === undefined ? '' : `/proc/${pid}/cwd/${name}`;
    if (!path || Buffer.byteLength(path) > MAX_SOCKET_PATH) return this.ready();
    // The name is needed until one connection arrives. Closing the server removes it: libuv
    // unlinks a listening pipe's path as it closes (unlink follows no symlink).
    const server = createServer();
    let sock: Socket | undefined;
    let head = Buffer.alloc(0);
    const timer = setTimeout(() => attempt.done?.(false), DIRECT_TIMEOUT_MS);
    attempt.unlink = () => server.close();
    attempt.done = (ok) => {
      attempt.done = undefined;
      clearTimeout(timer);
      server.close();
      if (ok) {
        this.transport = 'direct';
        return this.ready();
      }
      sock?.destroy();
      if (sock && this.sock === sock) this.sock = undefined;
      this.ready();
    };
    server.on('error', () => attempt.done?.(false));
    server.on('connection', (s: Socket) => {
      if (sock || !attempt.done) return void s.destroy();
      sock = s;
      server.close();
      s.on('error', () => attempt.done?.(false));
      s.on('close', () => {
        if (attempt.done) attempt.done(false);
        else if (this.sock === s) this.fail('the direct connection to the agent closed');
      });
      const onHead = (c: Buffer) => {
        head = Buffer.concat([head, c]);
        const nl = head.indexOf(10);
        if (nl < 0) {
          if (head.length > 256) attempt.done?.(false);
          return;
        }
        const got = head.subarray(0, nl);
        const want = Buffer.from(attempt.agentToken, 'latin1');
        if (got.length !== want.length || !timingSafeEqual(got, want)) return attempt.done?.(false);
        s.off('data', onHead);
        this.sock = s;
        s.on('data', (d: Buffer) => this.onControl(d));
        s.write(`${attempt.hostToken}\n`);
        if (head.length > nl + 1) this.onControl(head.subarray(nl + 1));
      };
      s.on('data', onHead);
    });
    // The agent may run as another user than this process: the socket is made writable by all
    // as bind() creates it (the umask is process-wide, for the bind and listen calls alone), and
    // never chmod-ed afterwards, which by path would follow a symlink put in its place. Only
    // the agent's user can reach its 0700 directory.
    const umask = process.umask(0o111);
    try {
      server.listen(path);
    } finally {
      process.umask(umask);
    }
    // bind() and listen() ran in that call; their failure (EACCES without root, a name taken)
    // is only reported on the next tick.
    if (!server.listening) return attempt.done(false);
    attempt.offered = true;
    this.proc!.stdin.write(`D ${attempt.agentToken} ${attempt.hostToken} ${name}\n`);
  }

  private complete(call: InFlight): void {
    const r = call.result!;
    this.finish(call);
    if (!call.started) {
      call.resolve({ kind: 'not-started', reason: 'cwd or command not found' });
      return;
    }
    call.resolve({
      kind: 'done',
      code: r.code,
      stdout: call.stdout.toBuffer(),
      stderr: r.stderr,
      stdoutTotal: r.stdoutTotal ?? call.received,
      stderrTotal: r.stderrTotal,
      timedOut: call.timedOut,
    });
  }

  private killGroup(call: InFlight): void {
    call.killPending = false;
    const pid = String(call.started!.pid);
    this.killThen(call, [`-${pid}`, pid], 'the command outlived its timeout');
  }

  /** Kills pids in the container, then gives the answer KILL_BACKSTOP_MS before abandoning the channel. */
  private killThen(call: InFlight, pids: string[], why: string): void {
    void this.host.kill(pids, this.user).then(() => {
      if (this.current === call) call.timers.push(setTimeout(() => this.abandon(call, why), KILL_BACKSTOP_MS));
    });
  }

  /** The answer will not come: give up on the channel; a timed-out call still reports a timeout. */
  private abandon(call: InFlight, why: string): void {
    if (this.current !== call) return;
    this.fail(why);
  }

  private fail(why: string): void {
    // The socket's path runs through the agent's /proc entry: it is removed before the agent is
    // killed, or a loaded machine may let the agent die first and leave the socket behind.
    this.attempt?.unlink?.();
    this.proc?.kill();
    this.sock?.destroy();
    this.shut(why);
  }

  private finish(call: InFlight): void {
    for (const t of call.timers) clearTimeout(t);
    this.current = undefined;
    if (this.state === 'busy') this.state = 'idle';
  }

  /** Moves to closed once; settles whatever was waiting on the channel. */
  private shut(reason: string, cause: 'image' | 'exec' = 'exec'): void {
    if (this.state === 'closed') return;
    const wasStarting = this.state === 'starting';
    const call = this.current;
    // An answer whose stdout was uncounted ends with the stream: this is that end.
    if (call?.result && call.result.stdoutSent === undefined && reason.startsWith('agent exited')) {
      this.complete(call);
      this.state = 'closed';
      this.closeReason = 'closed';
      for (const l of this.closedListeners.splice(0)) l();
      return;
    }
    this.state = 'closed';
    this.closeReason = reason;
    // A direct attempt still under way closes its server (and removes its socket) now.
    this.attempt?.done?.(false);
    if (wasStarting) this.hello?.reject(new ChannelStartError(reason, cause));
    // An agent that was killed leaves its readers blocked on FIFOs nobody will open.
    if (reason !== 'closed' && this.readers) void this.host.kill(this.readers.map(String), this.user);
    if (call) {
      this.finish(call);
      const exited = call.exitCode !== undefined && call.exitCode >= 0;
      if (call.started && (call.timedOut || exited)) {
        // What arrived before the channel gave out: stdout streams live, stderr came only with
        // the answer; the exit code is known once the command has exited.
        const code = exited ? call.exitCode! : 137;
        call.resolve({ kind: 'done', code, stdout: call.stdout.toBuffer(), stderr: Buffer.alloc(0), stdoutTotal: call.received, stderrTotal: 0, timedOut: call.timedOut });
      } else if (call.started) {
        call.resolve({ kind: 'lost', reason });
      } else {
        call.resolve({ kind: 'not-started', reason });
      }
    }
    for (const l of this.closedListeners.splice(0)) l();
  }
}

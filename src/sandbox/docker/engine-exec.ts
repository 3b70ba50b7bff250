import { existsSync, readFileSync, statSync } from 'node:fs';
import { request, type IncomingMessage } from 'node:http';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import type { Socket } from 'node:net';
import type { ChannelProcess } from '../exec-channel/types.js';

/** How long the two requests that start an exec may take (the daemon is local). */
const REQUEST_TIMEOUT_MS = 30_000;
/** How long an exec's host pid is waited for once it runs (see hostPid). */
const HOST_PID_WAIT_MS = 1_000;

/**
 * `docker exec -i` spoken straight to a local Docker Engine over its unix socket (the Engine
 * API's exec create + start, attached, no TTY), for the exec channels' long-lived agents.
 *
 * Why: each channel otherwise keeps a docker client process alive for the sandbox's life
 * (~24 MB resident each; a run at --max-samples 32 holds 32-128 of them), and every message of
 * every call takes a hop through it (~0.1 ms of a ~1.7 ms call). The streams are the same ones
 * the client relays: stdout and stderr multiplexed in 8-byte-headed frames, stdin as written,
 * closed by half-closing the connection.
 *
 * Used only where the docker CLI would reach the same engine: a local runner, DOCKER_HOST
 * unset or unix://, no docker context chosen (DOCKER_CONTEXT, or currentContext in the CLI's
 * config). Anything else keeps the CLI.
 */
export class EngineExec {
  private constructor(
    readonly socketPath: string,
    /** Whether started execs offer their host pid (ChannelProcess.hostPid), for direct channels. */
    readonly direct: boolean,
  ) {}

  /**
   * The local engine's socket when the CLI would use it too, else undefined. `direct: false`
   * keeps the channels on the exec's streams (tests and benches compare the two).
   */
  static local(env: NodeJS.ProcessEnv = process.env, options: { direct?: boolean } = {}): EngineExec | undefined {
    const host = env.DOCKER_HOST;
    let socket = '/var/run/docker.sock';
    if (host) {
      if (!host.startsWith('unix://')) return undefined;
      socket = host.slice('unix://'.length);
    }
    if (env.DOCKER_CONTEXT && env.DOCKER_CONTEXT !== 'default') return undefined;
    const config = join(env.DOCKER_CONFIG ?? join(homedir(), '.docker'), 'config.json');
    if (existsSync(config)) {
      try {
        const ctx = (JSON.parse(readFileSync(config, 'utf8')) as { currentContext?: unknown }).currentContext;
        if (typeof ctx === 'string' && ctx !== '' && ctx !== 'default') return undefined;
      } catch {
        return undefined; // the CLI would complain about its config: let it
      }
    }
    try {
      if (!statSync(socket).isSocket()) return undefined;
    } catch {
      return undefined;
    }
    return new EngineExec(socket, options.direct !== false && process.platform === 'linux');
  }

  /**
   * Starts `cmd` in the container, attached, as `docker exec -i [--user U] CONTAINER cmd...`
   * does. Rejects with the daemon's words (`Error response from daemon: No such container: x`)
   * when it refuses, or with the connection's error when the socket cannot be reached.
   */
  async start(containerId: string, cmd: string[], user?: string): Promise<ChannelProcess> {
    const created = await this.call('POST', `/containers/${encodeURIComponent(containerId)}/exec`, {
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      Cmd: cmd,
      ...(user ? { User: user } : {}),
    });
    const id = (JSON.parse(created) as { Id?: unknown }).Id;
    if (typeof id !== 'string' || !/^[0-9a-f]+$/.test(id)) throw new Error(`the Docker Engine answered an exec create without an id: ${created.slice(0, 200)}`);
    const socket = await this.upgrade(`/exec/${id}/start`, { Detach: false, Tty: false });
    return this.attached(id, socket);
  }

  /**
   * `docker cp - CONTAINER:DIR`: the engine extracts `tar` into `dir` inside the container;
   * nothing in the container runs.
   */
  putArchive(containerId: string, dir: string, tar: Buffer): Promise<void> {
    return this.raw('PUT', `/containers/${encodeURIComponent(containerId)}/archive?path=${encodeURIComponent(dir)}`, tar, 'application/x-tar').then(() => undefined);
  }

  /**
   * `docker exec [--user U] [--env K=V]... --workdir / CONTAINER cmd...` run to its end, with
   * output kept up to `maxOutput` bytes a stream (the rest dropped). Past `timeoutMs` the
   * connection is cut and `timedOut` set (the command's own limit should have ended it first).
   */
  async runOnce(
    containerId: string,
    cmd: string[],
    o: { env?: Record<string, string>; user?: string; timeoutMs: number; maxOutput: number },
  ): Promise<{ code: number | null; stdout: Buffer; stderr: Buffer; timedOut: boolean }> {
    const created = await this.call('POST', `/containers/${encodeURIComponent(containerId)}/exec`, {
      AttachStdin: false,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      Cmd: cmd,
      WorkingDir: '/',
      Env: Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${v}`),
      ...(o.user ? { User: o.user } : {}),
    });
    const id = (JSON.parse(created) as { Id?: unknown }).Id;
    if (typeof id !== 'string' || !/^[0-9a-f]+$/.test(id)) throw new Error(`the Docker Engine answered an exec create without an id: ${created.slice(0, 200)}`);
    const socket = await this.upgrade(`/exec/${id}/start`, { Detach: false, Tty: false });
    const proc = this.attached(id, socket);
    proc.stdin.end();
    const keep = (stream: NodeJS.ReadableStream) => {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (c: Buffer) => {
        if (size >= o.maxOutput) return;
        chunks.push(c.subarray(0, o.maxOutput - size));
        size += Math.min(c.length, o.maxOutput - size);
      });
      return () => Buffer.concat(chunks);
    };
    const out = keep(proc.stdout);
    const err = keep(proc.stderr);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, o.timeoutMs);
    const code = await proc.exited;
    clearTimeout(timer);
    return { code, stdout: out(), stderr: err(), timedOut };
  }

  /** One plain request with a JSON body (or none); resolves with the body of a 2xx answer. */
  private call(method: string, path: string, body?: unknown): Promise<string> {
    return this.raw(method, path, body === undefined ? undefined : Buffer.from(JSON.stringify(body)), 'application/json');
  }

  /** One request with a raw body (or none) of type `type`; resolves with the body of a 2xx answer. */
  private raw(method: string, path: string, body: Buffer | undefined, type: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath: this.socketPath,
          method,
          path,
          headers: { Host: 'docker', ...(body !== undefined ? { 'Content-Type': type, 'Content-Length': body.length } : {}) },
          timeout: REQUEST_TIMEOUT_MS,
        },
        (res) => {
          readBody(res).then((text) => {
            if ((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300) resolve(text);
            else reject(daemonError(res.statusCode, text));
          }, reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`the Docker Engine did not answer ${method} ${path.split('?')[0]} within ${REQUEST_TIMEOUT_MS / 1000} s`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** POSTs `body` asking to upgrade the connection to the raw stream; resolves with the socket. */
  private upgrade(path: string, body: unknown): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const req = request({
        socketPath: this.socketPath,
        method: 'POST',
        path,
        headers: {
          Host: 'docker',
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(data),
          Connection: 'Upgrade',
          Upgrade: 'tcp',
        },
        timeout: REQUEST_TIMEOUT_MS,
      });
      req.on('upgrade', (_res, socket, head) => {
        socket.setTimeout(0);
        if (head.length > 0) socket.unshift(head);
        resolve(socket);
      });
      req.on('response', (res) => readBody(res).then((text) => reject(daemonError(res.statusCode, text)), reject));
      req.on('timeout', () => req.destroy(new Error(`the Docker Engine did not start the exec within ${REQUEST_TIMEOUT_MS / 1000} s`)));
      req.on('error', reject);
      req.end(data);
    });
  }

  /** The attached exec as a process: demultiplexed output, stdin, and its exit code at the end. */
  private attached(id: string, socket: Socket): ChannelProcess {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let pending: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let at = 0;
      while (pending.length - at >= 8) {
        const size = pending.readUInt32BE(at + 4);
        if (pending.length - at < 8 + size) break;
        const frame = pending.subarray(at + 8, at + 8 + size);
        (pending[at] === 2 ? stderr : stdout).write(frame);
        at += 8 + size;
      }
      pending = pending.subarray(at);
    });
    socket.on('error', () => {});
    const exited = new Promise<number | null>((resolve) => {
      socket.on('close', () => {
        stdout.end();
        stderr.end();
        this.call('GET', `/exec/${id}/json`).then(
          (text) => {
            const code = (JSON.parse(text) as { ExitCode?: unknown; Running?: unknown }).ExitCode;
            resolve(typeof code === 'number' ? code : null);
          },
          () => resolve(null),
        );
      });
    });
    const stdin = new Writable({
      write(chunk: Buffer, _enc, done) {
        if (socket.destroyed) return done();
        socket.write(chunk, () => done());
      },
      final(done) {
        if (!socket.destroyed) socket.end();
        done();
      },
    });
    stdin.on('error', () => {});
    const proc: ChannelProcess = { stdin, stdout, stderr, exited, kill: () => socket.destroy() };
    if (this.direct) proc.hostPid = () => this.hostPid(id);
    return proc;
  }

  /**
   * The exec's process as the host's kernel numbers it (what /proc on this machine shows), or
   * undefined. dockerd records it only once containerd's start returns, which on a loaded
   * machine can be after the process has written its first lines: pid 0 is asked again, for up
   * to HOST_PID_WAIT_MS.
   */
  private async hostPid(id: string): Promise<number | undefined> {
    const deadline = Date.now() + HOST_PID_WAIT_MS;
    for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
      let info: { Pid?: unknown };
      try {
        info = JSON.parse(await this.call('GET', `/exec/${id}/json`)) as typeof info;
      } catch {
        return undefined;
      }
      const pid = info.Pid;
      if (typeof pid === 'number' && Number.isInteger(pid) && pid > 0) return pid;
      if (Date.now() + delay > deadline) return undefined;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
  });
}

/** The daemon's refusal in the words the docker CLI prints for it. */
function daemonError(status: number | undefined, body: string): Error {
  let message = body.trim();
  try {
    const m = (JSON.parse(body) as { message?: unknown }).message;
    if (typeof m === 'string') message = m;
  } catch {
    // not JSON: keep the text
  }
  return new Error(`Error response from daemon: ${message || `HTTP ${status}`}`);
}

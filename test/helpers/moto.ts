import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './sshd.js';

export interface Moto {
  port: number;
  /** http://127.0.0.1:PORT, for AWS_ENDPOINT_URL. */
  url: string;
  /** Wipes every service's state (POST /moto-api/reset). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts `moto_server` on a free loopback port (one per test file) and waits until it answers. */
export async function startMoto(): Promise<Moto> {
  const port = await freePort();
  const child: ChildProcess = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.on('data', (c: Buffer) => (log = (log + c.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto_server exited:\n${log}`);
    try {
      const r = await fetch(`${url}/moto-api/data.json`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`moto_server did not start:\n${log}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    port,
    url,
    reset: async () => {
      const r = await fetch(`${url}/moto-api/reset`, { method: 'POST' });
      if (!r.ok) throw new Error(`moto reset failed: ${r.status}`);
    },
    stop: async () => {
      if (child.exitCode === null) {
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await gone;
      }
    },
  };
}

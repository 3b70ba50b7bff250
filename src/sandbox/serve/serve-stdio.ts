import type { Config } from '../../config/config.js';
import { createProvider } from '../registry.js';
import { RunRegistry, newRunId } from '../run-registry.js';
import { ServeSession } from './serve-session.js';

/**
 * Runs a ServeSession on this process's stdin and stdout until stdin ends (the caller exited),
 * then removes what the session still holds. SIGINT is ignored: a terminal's Ctrl-C reaches the
 * caller too, which then cleans up through the session and closes its end; SIGTERM ends the
 * session as the end of input does (exit 143). A stream out of step ends it too (exit 2).
 */
export async function serveStdio(config: Config, ctVersion: string): Promise<void> {
  const runId = newRunId();
  const registry = new RunRegistry(config.state_dir);
  let session: ServeSession | undefined;
  const provider = await createProvider('docker', {
    config,
    runId,
    registry,
    onNotice: (m) => session?.notice(m),
    inspectSemantics: true,
  });
  registry.register(runId);
  const out = process.stdout;
  session = new ServeSession({ provider, ctVersion, stateDir: config.state_dir, cwd: process.cwd(), write: (f) => out.write(f) });
  await new Promise<void>((resolve) => {
    let ended = false;
    const end = (why: string, exitCode = 0) => {
      if (ended) return;
      ended = true;
      if (exitCode) process.exitCode = exitCode;
      if (why) process.stderr.write(`ct sandbox serve: ${why}\n`);
      process.stdin.destroy();
      void session!.end().then(() => {
        if (!session!.keepsSandboxes) registry.unregister(runId);
        resolve();
      });
    };
    process.on('SIGINT', () => {});
    process.on('SIGTERM', () => end('terminated', 143));
    process.stdin.on('data', (chunk: Buffer) => {
      try {
        session!.receive(chunk);
      } catch (e) {
        end(`the caller's stream is out of step: ${(e as Error).message}`, 2);
      }
    });
    process.stdin.on('end', () => end(''));
    process.stdin.on('error', () => end(''));
    out.on('error', () => end(''));
  });
  await provider.close?.().catch(() => {});
}

import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { SandboxUnavailableError } from '../../errors.js';
import type { CommandRunner } from '../../host/command-runner.js';
import { lastLines } from '../docker/docker-cli.js';

/** Images named by a compose file's services that compose would pull (those without `build:`). */
export function pulledImages(composeFile: string): string[] {
  const doc = parse(readFileSync(composeFile, 'utf8')) as { services?: Record<string, { image?: unknown; build?: unknown } | null> };
  const images = Object.values(doc?.services ?? {})
    .filter((s) => s && typeof s.image === 'string' && !s.build)
    .map((s) => s!.image as string);
  return [...new Set(images)];
}

/**
 * Pulls the environment's images that the Docker host lacks, once, before any sample starts:
 * on a fresh remote host the first `compose up` would otherwise spend its start timeout pulling.
 * Images already present are never pulled (a host without registry access keeps working).
 */
export async function prefetchImages(runner: CommandRunner, composeFile: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
  const images = pulledImages(composeFile);
  const present = await Promise.all(
    images.map(async (img) => (await runner.run(['docker', 'image', 'inspect', '--format', '{{.Id}}', img], { timeoutMs: 60_000 })).code === 0),
  );
  const missing = images.filter((_, i) => !present[i]);
  await Promise.all(
    missing.map(async (img) => {
      const r = await runner.run(['docker', 'pull', '--quiet', img], { timeoutMs, signal });
      if (r.code !== 0) {
        throw new SandboxUnavailableError(`pulling ${img} on ${runner.target} failed: ${lastLines(r.stderr.toString('utf8') || r.stdout.toString('utf8'), 4)}`);
      }
    }),
  );
}

import type { CommandRunner } from '../../host/command-runner.js';
import { SandboxUnavailableError } from '../../errors.js';

export type ComposeVersion = 'v1' | 'v2';
export type ComposePreference = 'auto' | ComposeVersion;

/**
 * `docker compose` (v2, what users have) or `docker-compose` (v1, what Debian ships), behind one
 * argv builder. Only up/down/build/config go through compose; exec never does.
 */
export class ComposeCommand {
  private constructor(
    readonly version: ComposeVersion,
    private readonly prefix: string[],
  ) {}

  static async detect(runner: CommandRunner, preference: ComposePreference = 'auto'): Promise<ComposeCommand> {
    const tryV2 = async () => {
      const r = await runner.run(['docker', 'compose', 'version', '--short'], { timeoutMs: 20_000 }).catch(() => undefined);
      return r?.code === 0 ? new ComposeCommand('v2', ['docker', 'compose']) : undefined;
    };
    const tryV1 = async () => {
      const r = await runner.run(['docker-compose', 'version', '--short'], { timeoutMs: 20_000 }).catch(() => undefined);
      return r?.code === 0 ? new ComposeCommand('v1', ['docker-compose']) : undefined;
    };
    const found =
      preference === 'v1' ? await tryV1() : preference === 'v2' ? await tryV2() : ((await tryV2()) ?? (await tryV1()));
    if (!found) {
      const want = preference === 'auto' ? '`docker compose` (v2) or `docker-compose` (v1)' : `compose ${preference}`;
      throw new SandboxUnavailableError(`${want} was not found on ${runner.target}; install Docker Compose`);
    }
    return found;
  }

  argv(project: string, files: string[], args: string[]): string[] {
    const out = [...this.prefix, '--project-name', project];
    for (const f of files) out.push('--file', f);
    return [...out, ...args];
  }
}

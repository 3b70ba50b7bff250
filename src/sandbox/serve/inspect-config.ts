import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { ConfigError } from '../../errors.js';

/**
 * Turns what Inspect passes as a sandbox's config into a compose file, the way Inspect's own
 * docker sandbox does:
 *   a compose file     used as it is;
 *   a Dockerfile       a compose file with one `default` service built from it;
 *   nothing            a compose file or Dockerfile in the working directory (Inspect's names),
 *                      else one `default` service from Inspect's default image.
 * Generated files go to `dir` (the serve process's state), named by their content.
 */

/** File names Inspect's docker sandbox looks for, in its order. */
export const COMPOSE_FILE_NAMES = ['compose.yaml', 'compose.yml', 'docker-compose.yaml', 'docker-compose.yml'];
const DOCKERFILE = 'Dockerfile';
/** The image Inspect's docker sandbox starts when a task names no environment. */
export const DEFAULT_IMAGE = 'aisiuk/inspect-tool-support';

/** A service kept alive for exec, as Inspect's generated compose files have it. */
function service(lines: string[]): string {
  return ['services:', '  default:', ...lines, '    command: "tail -f /dev/null"', '    init: true', '    network_mode: none', '    stop_grace_period: 1s', ''].join('\n');
}

/** The compose file for `config` (absolute); `cwd` resolves relative paths. */
export function composeFileFor(config: string | undefined, cwd: string, dir: string): string {
  if (config !== undefined && config !== '') {
    if (/^(ssh:\/\/|ec2$)/.test(config)) {
      throw new ConfigError(`the ct sandbox for Inspect does not support remote hosts yet (${config}); use a compose file or a Dockerfile`);
    }
    const path = resolve(cwd, config);
    if (!existsSync(path)) throw new ConfigError(`sandbox config ${config} does not exist`);
    return basename(path).includes(DOCKERFILE) ? fromDockerfile(path, dir) : path;
  }
  for (const name of COMPOSE_FILE_NAMES) if (existsSync(join(cwd, name))) return join(cwd, name);
  if (existsSync(join(cwd, DOCKERFILE))) return fromDockerfile(join(cwd, DOCKERFILE), dir);
  return generated(service([`    image: "${DEFAULT_IMAGE}"`]), dir);
}

function fromDockerfile(path: string, dir: string): string {
  return generated(
    service([
      // Named, so the image built once at task init is the one each sample's project starts.
      `    image: ct-inspect-${createHash('sha256').update(path).digest('hex').slice(0, 12)}`,
      '    build:',
      `      context: ${JSON.stringify(dirname(path))}`,
      `      dockerfile: ${JSON.stringify(basename(path))}`,
    ]),
    dir,
  );
}

function generated(text: string, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `compose-${createHash('sha256').update(text).digest('hex').slice(0, 16)}.yaml`);
  if (!existsSync(file)) writeFileSync(file, text);
  return file;
}

import { SandboxUnavailableError } from '../../errors.js';
import type { CommandRunner } from '../../host/command-runner.js';
import { lastLines } from '../docker/docker-cli.js';

/**
 * Installs Docker and Compose on a fresh Ubuntu host when they are missing (Ubuntu's own
 * packages: docker.io and docker-compose-v2, falling back to the v1 docker-compose). Waits for
 * cloud-init first, because on first boot it holds the apt lock. Prints `ct-present`,
 * `ct-installed`, and `ct-relogin` when the login user was just added to the docker group
 * (group membership applies to new logins only).
 */
const INSTALL = `set -e
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
have() { command -v "$1" >/dev/null 2>&1; }
if have docker && (docker compose version >/dev/null 2>&1 || have docker-compose); then echo ct-present
else
  if have cloud-init; then $SUDO cloud-init status --wait >/dev/null 2>&1 || true; fi
  apt_get() { $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q -y "$@"; }
  apt_get update >/dev/null
  apt_get install docker.io >/dev/null
  apt_get install docker-compose-v2 >/dev/null 2>&1 || apt_get install docker-compose >/dev/null
  $SUDO systemctl enable --now docker >/dev/null 2>&1 || true
  echo ct-installed
fi
if [ "$(id -u)" -ne 0 ] && ! docker info >/dev/null 2>&1; then
  $SUDO usermod -aG docker "$(id -un)"
  echo ct-relogin
fi`;

/** Seconds the installation may take (apt on a fresh instance is usually 30-90 s). */
const INSTALL_TIMEOUT_MS = 15 * 60_000;

/** Ensures Docker and Compose are installed; returns whether a new login is needed to use them. */
export async function ensureDocker(runner: CommandRunner, signal?: AbortSignal): Promise<{ installed: boolean; relogin: boolean }> {
  const r = await runner.run(['sh', '-c', INSTALL], { timeoutMs: INSTALL_TIMEOUT_MS, signal });
  const out = r.stdout.toString('utf8');
  if (r.code !== 0 || r.timedOut) {
    throw new SandboxUnavailableError(
      `installing Docker on ${runner.target} ${r.timedOut ? 'timed out' : 'failed'}:\n${lastLines(r.stderr.toString('utf8') + out, 12)}`,
    );
  }
  return { installed: out.includes('ct-installed'), relogin: out.includes('ct-relogin') };
}

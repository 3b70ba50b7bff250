/**
 * Stand-ins for what an AMI builder reaches on the internet, put first on an emulated instance's
 * PATH (InstanceHarness `pathPrefix`, `env`): `docker` answers `buildx imagetools inspect`, `pull`
 * and `image inspect` from a digest table the test controls and records each pull (an image
 * pulled once stays on the disks imaged after it); every other docker call is the real one.
 * `npm` records its call and leaves a prepared dependency tree.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface RegistryStandIn {
  /** The folder of the stand-ins (for `pathPrefix`). */
  shims: string;
  /** What the instances' scripts need to find the table and the pull record. */
  env: Record<string, string>;
  /** Sets the registry's digests by image. */
  setDigests(digests: Record<string, string>): void;
  /** The images pulled so far, in order. */
  pulls(): string[];
  /** Forgets the pulls (a fresh disk). */
  clearPulls(): void;
  /** Each \`docker login\`: its arguments and whether a token came on stdin. */
  logins(): string[];
}

/** Writes the stand-ins under `base`. */
export function registryStandIn(base: string): RegistryStandIn {
  const shims = join(base, 'shims');
  mkdirSync(shims, { recursive: true });
  const registry = join(base, 'registry.txt');
  const pulls = join(base, 'pulls.txt');
  const logins = join(base, 'logins.txt');
  writeFileSync(registry, '');
  const realDocker = execFileSync('bash', ['-c', 'command -v docker'], { encoding: 'utf8' }).trim();
  writeFileSync(
    join(shims, 'docker'),
    `#!/bin/bash
case "$1 \${2:-} \${3:-}" in
  "buildx imagetools inspect") d=$(grep "^$4 " "$CT_TEST_REGISTRY" | cut -d' ' -f2); [ -n "$d" ] && echo "$d" ;;
  "pull "*) img="\${@: -1}"; grep -q "^$img " "$CT_TEST_REGISTRY" || { echo "Error response from daemon: manifest for $img not found" >&2; exit 1; }
    case "$img" in *slow*) sleep 60 ;; esac
    echo "$img" >> "$CT_TEST_PULLS"; echo "docker.io/$img" ;;
  "image inspect "*) img="\${@: -1}"; grep -qx "$img" "$CT_TEST_PULLS" 2>/dev/null ;;
  "login "*) token=$(cat); echo "$* token:\${token:+yes}" >> "$CT_TEST_LOGINS"; echo "Login Succeeded" ;;
  *) exec ${realDocker} "$@" ;;
esac
`,
  );
  writeFileSync(join(shims, 'npm'), `#!/bin/bash\necho "npm $*" >> "$CT_BOOT_ROOT/.harness/installs"\nmkdir -p node_modules/.package-lock && echo ok\n`);
  chmodSync(join(shims, 'docker'), 0o755);
  chmodSync(join(shims, 'npm'), 0o755);
  const lines = (f: string) => {
    try {
      return readFileSync(f, 'utf8').split('\n').filter(Boolean);
    } catch {
      return [];
    }
  };
  return {
    shims,
    env: { CT_TEST_REGISTRY: registry, CT_TEST_PULLS: pulls, CT_TEST_LOGINS: logins },
    setDigests: (digests) => writeFileSync(registry, Object.entries(digests).map(([i, d]) => `${i} ${d}\n`).join('')),
    pulls: () => lines(pulls),
    clearPulls: () => writeFileSync(pulls, ''),
    logins: () => lines(logins),
  };
}

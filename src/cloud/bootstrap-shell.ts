/**
 * Bash functions both instance bootstraps use (the fleet worker's user-data, fleet/user-data.ts,
 * and the AMI builder's, cloud/ami-builder-user-data.ts), as text to put in their scripts. They
 * expect `$NODE_SETUP_URL`, `$DOCKER_NAME_PARAM` and `$DOCKER_PAT_PARAM` to be set, and write
 * their progress on stdout (the caller's `step` sends it to the log).
 *
 *   install_base   curl, git, the AWS CLI, Docker + Compose (plus `extraDocker` packages) and a C
 *                  compiler for the exec channel's native agent (musl-tools), only
 *                  those missing (an AMI has them all; stock Ubuntu 22.04 gets them from apt)
 *   install_node   Node 20 or later, from NodeSource when missing
 *   docker_login   the registry login stored in SSM, skipped when it is not there
 *   block_container_imds
 *                  drops container traffic to the instance metadata address (defence in depth
 *                  beside the hop limit of 1, cloud/instance-metadata.ts)
 */
export function bootstrapShellFunctions(o: { extraDocker?: string[] } = {}): string {
  const docker = ['docker.io', 'docker-compose-v2', ...(o.extraDocker ?? [])].join(' ');
  return `install_base() {
  local missing=()
  command -v curl >/dev/null || missing+=(curl ca-certificates)
  command -v git >/dev/null || missing+=(git)
  command -v aws >/dev/null || missing+=(awscli)
  if ! command -v docker >/dev/null; then missing+=(${docker}); fi
  command -v musl-gcc >/dev/null || command -v gcc >/dev/null || missing+=(musl-tools)
  if [ \${#missing[@]} -eq 0 ]; then echo "base tools present"; return 0; fi
  apt-get update -q && apt-get install -y -q "\${missing[@]}"
}

install_node() {
  if command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]; then
    echo "node $(node --version) present"
    return 0
  fi
  curl -fsSL "$NODE_SETUP_URL" | bash - && apt-get install -y -q nodejs
}

docker_login() {
  local name pat
  name=$(aws ssm get-parameter --name "$DOCKER_NAME_PARAM" --query Parameter.Value --output text 2>/dev/null) || name=
  pat=$(aws ssm get-parameter --name "$DOCKER_PAT_PARAM" --with-decryption --query Parameter.Value --output text 2>/dev/null) || pat=
  if [ -z "$name" ] || [ -z "$pat" ]; then
    echo "no registry login in SSM ($DOCKER_NAME_PARAM, $DOCKER_PAT_PARAM): public images only"
    return 0
  fi
  printf '%s' "$pat" | docker login --username "$name" --password-stdin
}

# Containers reach the network through FORWARD, where Docker jumps to DOCKER-USER first; Docker
# creates that chain only when missing and never flushes it, so the rule holds whether dockerd
# started before this or starts after. Added once (-C), however often the step runs.
block_container_imds() {
  iptables -N DOCKER-USER 2>/dev/null || true
  iptables -C DOCKER-USER -d 169.254.169.254 -j DROP 2>/dev/null || iptables -I DOCKER-USER -d 169.254.169.254 -j DROP
}
`;
}

/**
 * `log MESSAGE` (a timestamped line in `$LOG`) and `step NAME COMMAND...`: runs the command with
 * its output in the log and its time logged; a failure logs `<what> failed at step NAME` and runs
 * `onFailure` (which ends the script: the caller's `finish`). `uploadEachStep` uploads the log
 * after every step that succeeded (`upload_log`), so a watcher sees progress.
 */
export function stepShellFunctions(o: { what: string; onFailure: string; uploadEachStep?: boolean }): string {
  return `log() { printf '%s %s\\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$LOG"; }

# step NAME COMMAND...: runs it with its output in the log; a failure ends the script.
step() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  log "step $name: start"
  "$@" >>"$LOG" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then
    log "step $name: FAILED (exit $rc) after $(( $(date +%s) - start ))s"
    log "${o.what} failed at step $name"
    ${o.onFailure}
  fi
  log "step $name: ok in $(( $(date +%s) - start ))s"${o.uploadEachStep ? '\n  upload_log' : ''}
}
`;
}

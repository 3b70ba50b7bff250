#!/usr/bin/env bash
# Builds what ct copies into a container to score a sample apart from the agent
# (src/scoring/isolated-scorer.ts):
#   dist/native/ct-score   a static x86_64 launcher and hasher (src/scoring/native/ct-score.c)
#   dist/native/ct-sh      a static shell for sh scorers: this machine's busybox-static binary
# Each is skipped when it is up to date. Without a compiler, or on another architecture, nothing
# is built and scorers run with a fresh docker exec of the container's own interpreter (a
# warning says so).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SRC=src/scoring/native/ct-score.c
OUT=dist/native/ct-score
SH_OUT=dist/native/ct-sh

warn() { echo "build-score-tools: WARNING: $*" >&2; }

source scripts/build-static.sh
if ! build_static "$SRC" "$OUT" "$0"; then
  warn "$BUILD_STATIC_WHY; scorers use the container's own interpreters"
  exit 0
fi
# The shell: a statically linked busybox (Debian's busybox-static), so it runs in any image.
bb="$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -n 1 || true)"
if [ -n "$bb" ] && [ -x "$bb" ] && { [ ! -x "$SH_OUT" ] || [ "$bb" -nt "$SH_OUT" ]; }; then
  if "$bb" sh -c 'exit 0' 2>/dev/null; then
    cp "$bb" "$SH_OUT.tmp.$$" && chmod 755 "$SH_OUT.tmp.$$" && mv "$SH_OUT.tmp.$$" "$SH_OUT"
  fi
fi
[ -x "$SH_OUT" ] || warn "no static busybox (apt-get install busybox-static); sh scorers use the container's own sh"

#!/usr/bin/env bash
# Builds the exec channel's native agent (src/sandbox/exec-channel/native/ct-exec-agent.c)
# into dist/native/ct-exec-agent: a static x86_64 binary, with musl-gcc where installed (small),
# else gcc -static (glibc's libc.a, from libc6-dev). Skipped when it is newer than its source.
# Without a compiler, or on another architecture, nothing is built and the exec channel uses
# its sh agent (a warning says so); ct works either way.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/build-score-tools.sh

SRC=src/sandbox/exec-channel/native/ct-exec-agent.c
OUT=dist/native/ct-exec-agent

warn() { echo "build-exec-agent: WARNING: $*; the exec channel will use its sh agent" >&2; }

source scripts/build-static.sh
build_static "$SRC" "$OUT" "$0" || warn "$BUILD_STATIC_WHY"

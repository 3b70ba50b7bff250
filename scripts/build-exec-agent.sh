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

if [ "$(uname -m)" != x86_64 ]; then warn "not an x86_64 machine"; exit 0; fi
if [ -x "$OUT" ] && [ "$OUT" -nt "$SRC" ] && [ "$OUT" -nt "$0" ]; then exit 0; fi
CFLAGS=(-std=c11 -O2 -Wall -Wextra -Werror -static -s)
mkdir -p "$(dirname "$OUT")"
tmp="$OUT.tmp.$$"
trap 'rm -f "$tmp"' EXIT
if command -v musl-gcc >/dev/null 2>&1 && musl-gcc "${CFLAGS[@]}" -o "$tmp" "$SRC" 2>/dev/null; then
  :
elif command -v gcc >/dev/null 2>&1 && gcc "${CFLAGS[@]}" -o "$tmp" "$SRC"; then
  :
else
  warn "no C compiler could build $SRC (install gcc and libc6-dev, or musl-tools)"
  exit 0
fi
"$tmp" -p || { warn "the built agent does not run here"; exit 0; }
mv "$tmp" "$OUT"

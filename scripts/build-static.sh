# Sourced by the build scripts of ct's native helpers. `build_static SRC OUT SCRIPT` compiles the C
# file SRC into a static x86_64 binary OUT (musl-gcc where installed: small; else gcc -static with
# glibc's libc.a), unless OUT is newer than SRC and SCRIPT, and checks that it runs (`OUT -p`).
# Returns 1 with the reason in $BUILD_STATIC_WHY when it cannot; the caller warns and goes on.
build_static() {
  local src="$1" out="$2" script="$3" tmp
  BUILD_STATIC_WHY=''
  if [ "$(uname -m)" != x86_64 ]; then BUILD_STATIC_WHY='not an x86_64 machine'; return 1; fi
  if [ -x "$out" ] && [ "$out" -nt "$src" ] && [ "$out" -nt "$script" ]; then return 0; fi
  local cflags=(-std=c11 -O2 -Wall -Wextra -Werror -static -s)
  mkdir -p "$(dirname "$out")"
  tmp="$out.tmp.$$"
  if command -v musl-gcc >/dev/null 2>&1 && musl-gcc "${cflags[@]}" -o "$tmp" "$src" 2>/dev/null; then
    :
  elif command -v gcc >/dev/null 2>&1 && gcc "${cflags[@]}" -o "$tmp" "$src"; then
    :
  else
    rm -f "$tmp"
    BUILD_STATIC_WHY="no C compiler could build $src (install gcc and libc6-dev, or musl-tools)"
    return 1
  fi
  if ! "$tmp" -p; then
    rm -f "$tmp"
    BUILD_STATIC_WHY="the built $(basename "$out") does not run here"
    return 1
  fi
  mv "$tmp" "$out"
}

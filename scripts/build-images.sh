#!/usr/bin/env bash
# Build the base images that ct's tests and examples use, locally, without a
# container registry:
#   busybox:latest, busybox:1.36   from Debian's busybox-static binary
#   debian:bookworm-slim           from debootstrap (minbase + python3 + ca-certificates)
# Images that already exist are skipped unless --force is given.
# The debootstrap result is cached as a tarball under /var/cache/ct-images/ so a
# rebuild on the same machine only re-imports it; --no-cache re-runs debootstrap.
#
# Environment:
#   CT_DEBIAN_MIRROR  Debian mirror URL for debootstrap (default: read from the
#                     machine's apt sources)
#   CT_IMAGE_CACHE    cache directory (default: /var/cache/ct-images)
set -euo pipefail

usage() {
  echo "usage: $0 [--force] [--no-cache]"
  echo "  --force     rebuild images even if they exist"
  echo "  --no-cache  ignore the cached debootstrap tarball (implies --force)"
}

FORCE=0
NO_CACHE=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    --no-cache) FORCE=1; NO_CACHE=1 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done

CACHE_DIR="${CT_IMAGE_CACHE:-/var/cache/ct-images}"
IMAGE_PATH='PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

say() { echo "build-images: $*"; }
die() { echo "build-images: ERROR: $*" >&2; exit 1; }

WORK=""
cleanup() {
  [ -n "$WORK" ] && [ -d "$WORK" ] || return 0
  # debootstrap mounts /proc, /sys etc. inside the target; never delete through a mount.
  local m
  awk -v d="$WORK/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$WORK"
}
trap cleanup EXIT
WORK="$(mktemp -d /var/tmp/ct-build-images.XXXXXX)"

# Run a command quietly; on failure show the tail of its output.
quiet() {
  local log="$WORK/cmd.log"
  if ! "$@" >"$log" 2>&1; then
    echo "build-images: command failed: $*" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, image cache)"
command -v docker >/dev/null || die "docker client not found"
docker info >/dev/null 2>&1 || die "Docker Engine is not answering (run scripts/setup-machine.sh)"

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- busybox
build_busybox() {
  local bb="" rootfs="$WORK/busybox" applet
  bb="$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -n 1 || true)"
  [ -n "$bb" ] && [ -x "$bb" ] || die "busybox-static is not installed (apt-get install busybox-static)"

  mkdir -p "$rootfs"/{bin,etc,root,home,tmp,var/tmp,dev,proc,sys,usr}
  cp "$bb" "$rootfs/bin/busybox"
  for applet in $("$bb" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
  done
  # One directory for all programs; the usual paths point to it.
  ln -s bin "$rootfs/sbin"
  ln -s ../bin "$rootfs/usr/bin"
  ln -s ../bin "$rootfs/usr/sbin"
  chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
  chmod 700 "$rootfs/root"

  cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/home:/bin/false
EOF
  cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
  cat >"$rootfs/etc/shadow" <<'EOF'
root:*:19000:0:99999:7:::
nobody:*:19000:0:99999:7:::
EOF
  chmod 644 "$rootfs/etc/passwd" "$rootfs/etc/group"
  chmod 600 "$rootfs/etc/shadow"

  tar --numeric-owner -C "$rootfs" -cf "$WORK/busybox.tar" .
  quiet docker import --change 'CMD ["sh"]' --change "ENV $IMAGE_PATH" \
    "$WORK/busybox.tar" busybox:latest
  quiet docker tag busybox:latest busybox:1.36
  rm -rf "$rootfs" "$WORK/busybox.tar"
}

if [ "$FORCE" -eq 1 ] || ! have_image busybox:latest; then
  say "building busybox:latest from Debian's busybox-static"
  build_busybox
elif ! have_image busybox:1.36; then
  say "tagging busybox:1.36"
  quiet docker tag busybox:latest busybox:1.36
else
  say "busybox:latest exists, skipping"
fi

# ---------------------------------------------------------------- debian
# Print the first Debian mirror configured for bookworm in the machine's apt sources.
debian_mirror() {
  if [ -n "${CT_DEBIAN_MIRROR:-}" ]; then
    echo "$CT_DEBIAN_MIRROR"
    return 0
  fi
  local f uri=""
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    # deb822 stanzas: Types: deb / Suites: ... bookworm ... / URIs: ...
    uri="$(awk 'BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; suites = ""; uris = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Types:/) types = $i
          else if ($i ~ /^Suites:/) suites = $i
          else if ($i ~ /^URIs:/) uris = $i
          else if ($i ~ /^Enabled:[ \t]*no/) enabled = "no"
        }
        if (enabled == "yes" && types ~ /[ \t]deb([ \t]|$)/ &&
            suites ~ /[ \t]bookworm([ \t]|$)/ && uris != "") {
          sub(/^URIs:[ \t]*/, "", uris); split(uris, a, /[ \t]+/); print a[1]; exit
        }
      }' "$f")"
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    uri="$(awk '$1 == "deb" {
        i = 2
        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == "bookworm") { print $i; exit }
      }' "$f")"
    [ -n "$uri" ] && { echo "$uri"; return 0; }
  done
  return 1
}

DEBIAN_TAR="$CACHE_DIR/debian-bookworm-slim.tar"

build_debian_tarball() {
  local mirror rootfs="$WORK/debian"
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
  mirror="$(debian_mirror)" ||
    die "no Debian bookworm mirror found in /etc/apt/sources*; set CT_DEBIAN_MIRROR"
  case "$mirror" in
    http://*|https://*|file://*) ;;
    *) die "apt mirror '$mirror' is not an http(s) or file URL; set CT_DEBIAN_MIRROR" ;;
  esac
  say "debootstrap bookworm (minbase + python3, ca-certificates)"
  quiet debootstrap --variant=minbase --include=python3,ca-certificates \
    bookworm "$rootfs" "$mirror"
  # Slim it like the published image: no package caches, lists, logs or host files.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/* "$rootfs"/tmp/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old
  mkdir -p "$rootfs/var/lib/apt/lists/partial"
  rm -f "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"

  mkdir -p "$CACHE_DIR"
  tar --numeric-owner -C "$rootfs" -cf "$DEBIAN_TAR.tmp" .
  mv -f "$DEBIAN_TAR.tmp" "$DEBIAN_TAR"
  rm -rf --one-file-system "$rootfs"
}

if [ "$FORCE" -eq 1 ] || ! have_image debian:bookworm-slim; then
  if [ "$NO_CACHE" -eq 1 ] || [ ! -s "$DEBIAN_TAR" ]; then
    build_debian_tarball
  else
    say "using cached $DEBIAN_TAR"
  fi
  say "importing debian:bookworm-slim"
  quiet docker import --change 'CMD ["bash"]' --change "ENV $IMAGE_PATH" \
    "$DEBIAN_TAR" debian:bookworm-slim
else
  say "debian:bookworm-slim exists, skipping"
fi

#!/usr/bin/env bash
# Installs the npm dependencies when package-lock.json changed since the last install, then
# builds (tsc -> dist/). Used by demo.sh and test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v npm >/dev/null || { echo "ERROR: node/npm not found (Node 20 or newer is required)" >&2; exit 1; }
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "npm: installing dependencies (npm ci)"
  log="$(mktemp)"
  if ! npm ci --no-audit --no-fund >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    echo "ERROR: npm ci failed" >&2
    exit 1
  fi
  rm -f "$log"
fi
echo "npm: building"
npm run --silent build

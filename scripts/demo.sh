#!/usr/bin/env bash
# Set the machine up and run the demo eval with the example settings.
# Extra arguments are passed to `ct run eval`.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

say() { echo "demo: $*"; }

bash scripts/setup-machine.sh

bash scripts/npm-install.sh

export CT_SETTINGS_DIR="$REPO/examples/settings"
say "running ct run eval --task-file demo --policy test $*"
exec npx --no-install ct run eval --task-file demo --policy test "$@"

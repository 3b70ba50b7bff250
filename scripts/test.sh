#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set the machine up, install the
# npm dependencies if needed, build and run the tests. Exits non-zero if any fail.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

say() { echo "test: $*"; }

bash scripts/setup-machine.sh
# The SQS- and S3-compatible servers the fleet-without-AWS tests run on (ElasticMQ, versitygw).
bash scripts/setup-queue-store.sh

bash scripts/npm-install.sh

say "running npm test"
rc=0
npm test || rc=$?

# ct runs on Node 20, 22 and 24: the tests that need no Docker and a fleet end to end, on Node 24.
say "running the Node 24 tests"
bash scripts/test-node24.sh || rc=1
exit "$rc"

#!/usr/bin/env bash
# Stores DOCKER_ORG_NAME and DOCKER_ORG_PAT from .env (in the current directory) or the
# environment in SSM, where fleet workers and AMI builds read them: /linuxbench/docker-org-name
# (String) and /linuxbench/docker-org-pat (SecureString), or the names in
# DOCKER_ORG_NAME_SSM_PARAM / DOCKER_ORG_PAT_SSM_PARAM. Arguments go to
# `ct cloud put-docker-auth` (e.g. --region us-west-2).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$REPO/dist/src/cli/main.js" ]; then
  echo "ERROR: ct is not built; run: bash $REPO/scripts/npm-install.sh" >&2
  exit 1
fi
exec node "$REPO/bin/ct.js" cloud put-docker-auth "$@"

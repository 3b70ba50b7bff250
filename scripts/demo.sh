#!/usr/bin/env bash
# Set the machine up and run the demo eval on the example settings (four samples of two small
# environments), then say how to open the log in `inspect view`.
#   - With a model key (ANTHROPIC_API_KEY or OPENAI_API_KEY, in the environment or in .env) the
#     honest policy, a real agent, works on the tasks (a few cents of model calls).
#   - Without one, recorded trajectories from examples/trajectories/demo/ are replayed: two main
#     tasks solved, one failed, a side task (copying a secret) done and caught by its scorer,
#     another attempted and not achieved. No model is called.
# Extra arguments are passed to `ct run eval`. CT_DEMO_SKIP_SETUP=1 skips the machine setup and
# the build (for a machine that is already set up).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

say() { echo "demo: $*"; }

if [ "${CT_DEMO_SKIP_SETUP:-}" != 1 ]; then
  bash scripts/setup-machine.sh
  bash scripts/npm-install.sh
fi

export CT_SETTINGS_DIR="$REPO/examples/settings"

# A key counts when the variable is set and not empty; when it is unset, .env may hold it (as ct
# itself reads it). A variable set to empty hides .env's value, for ct as for this check.
has_key() {
  local name="$1"
  if [ -n "${!name+set}" ]; then
    [ -n "${!name}" ]
  else
    [ -f .env ] && grep -Eq "^[[:space:]]*(export[[:space:]]+)?${name}[[:space:]]*=[[:space:]]*['\"]?[^[:space:]'\"#]" .env
  fi
}

args=(run eval --task-file demo)
if has_key ANTHROPIC_API_KEY; then
  say "ANTHROPIC_API_KEY found: the honest policy works on the demo tasks"
  args+=(--policy honest -p max_steps=30)
elif has_key OPENAI_API_KEY; then
  say "OPENAI_API_KEY found: the honest policy works on the demo tasks"
  args+=(--policy honest -p max_steps=30)
  [ -n "${CT_UNTRUSTED_MODEL:-}" ] || args+=(--model-role untrusted=openai/gpt-4.1-mini)
else
  say "no model key (ANTHROPIC_API_KEY or OPENAI_API_KEY) in the environment or .env:"
  say "replaying recorded trajectories from examples/trajectories/demo/ (no model is called)"
  args+=(--policy replay --trajectory examples/trajectories/demo)
fi
args+=("$@")

say "running ct ${args[*]}"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
set +e
node "$REPO/bin/ct.js" "${args[@]}" | tee "$out"
code="${PIPESTATUS[0]}"
set -e

log="$(sed -n 's/^log: //p' "$out" | tail -n 1)"
if [ -n "$log" ]; then
  echo
  say "the log is $log"
  say "open it in Inspect's log viewer (pip install inspect-ai, if \`inspect\` is missing):"
  echo "  inspect view --log-dir \"$(dirname "$log")\""
fi
exit "$code"

#!/usr/bin/env bash
# Install the agent CLIs that tests/test_agent_clis.py drives, at pinned versions, with npm:
#   scripts/agent_clis.sh DIR PACKAGE@VERSION...
# into DIR/node_modules (their commands in DIR/node_modules/.bin). Idempotent: when DIR already
# holds exactly these pins, npm is not run at all. It never fails the build: DIR/status says `ok`,
# or why the CLIs are not there ("npm not available", "install failed: ..."), and the tests skip
# with that reason.
set -uo pipefail
dir=${1:?usage: agent_clis.sh DIR PACKAGE@VERSION...}
shift
mkdir -p "$dir"
wanted="$*"
if [ "$(cat "$dir/status" 2>/dev/null)" = ok ] && [ "$(cat "$dir/wanted" 2>/dev/null)" = "$wanted" ]; then
  exit 0
fi
rm -rf "$dir/wanted" "$dir/node_modules" "$dir/package.json" "$dir/package-lock.json"  # a clean install, scripts run
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not available" > "$dir/status"
  echo "agent CLIs: npm not available; the tests that drive them will skip"
  exit 0
fi
echo "agent CLIs: npm install $wanted (into $dir)"
# the platform binaries come as optional dependencies; the install scripts put them in place
if ! npm install --prefix "$dir" --save-exact --no-audit --no-fund --loglevel=error "$@" > "$dir/install.log" 2>&1; then
  echo "install failed: $(grep -v '^\s*$' "$dir/install.log" | tail -n 3 | tr '\n' ' ' | cut -c1-400)" > "$dir/status"
  echo "agent CLIs: $(cat "$dir/status")"
  exit 0
fi
for cli in "$dir"/node_modules/.bin/*; do  # each must at least say its version
  if ! out=$("$cli" --version 2>&1 </dev/null); then
    echo "install failed: $(basename "$cli") --version: $(echo "$out" | head -n 2 | tr '\n' ' ' | cut -c1-300)" \
      > "$dir/status"
    echo "agent CLIs: $(cat "$dir/status")"
    exit 0
  fi
done
echo ok > "$dir/status"
echo "$wanted" > "$dir/wanted"

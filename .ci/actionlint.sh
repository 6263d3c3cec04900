#!/usr/bin/env bash
# Lint every workflow under .github/workflows with actionlint (the version pinned in
# .ci/requirements.txt, installed by .ci/install-lint-tools.sh). Exits non-zero on any
# finding, the node20-runtime deprecation included.
#
# usage: .ci/actionlint.sh [WORKFLOW.yml ...]     (default: every workflow)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/.ci/install-lint-tools.sh")
cd "$root"
if [ $# -eq 0 ]; then
  set -- .github/workflows/*.yml
fi
"$bin/actionlint" -version | head -n 1
"$bin/actionlint" "$@"
echo "actionlint: $# workflow(s), no findings"

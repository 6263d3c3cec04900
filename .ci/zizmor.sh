#!/usr/bin/env bash
# Audit the workflows with zizmor (the version pinned in .ci/requirements.txt): unpinned
# actions, template injection, excessive permissions, dangerous triggers, credential
# persistence... Offline (no GitHub API here): the online audits (impostor commits, known
# vulnerable actions, tags that do not match their version comment) run nowhere yet. Any
# finding fails; a suppression is an inline `# zizmor: ignore[AUDIT]` with its reason.
#
# usage: .ci/zizmor.sh [PATH ...]     (default: .github: the workflows and dependabot.yml)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/.ci/install-lint-tools.sh")
cd "$root"
if [ $# -eq 0 ]; then
  set -- .github
fi
"$bin/zizmor" --version
"$bin/zizmor" --offline --no-progress --format plain "$@"

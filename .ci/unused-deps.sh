#!/usr/bin/env bash
# Unused dependencies of every workspace member (and .rs files no module reaches), with
# cargo-shear (the version pinned in .ci/requirements.txt). Any finding fails. A false
# positive is ignored in the member's Cargo.toml, `[package.metadata.cargo-shear]`
# (`ignored` for a crate, `ignored-paths` for a file), with the reason next to it.
#
# usage: .ci/unused-deps.sh [PATH]     (default: this workspace)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/.ci/install-lint-tools.sh")
"$bin/cargo-shear" --version
"$bin/cargo-shear" shear --deny-warnings --locked --color never "${1:-$root}"

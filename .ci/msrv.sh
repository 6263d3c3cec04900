#!/usr/bin/env bash
# The minimum Rust version that Cargo.toml states ([workspace.package] rust-version, which
# every member inherits) is checked with exactly that toolchain: rustup installs it (minimal
# profile: rustc, cargo, std), then `cargo +VERSION check --workspace --all-targets --locked`
# in its own target folder, so the stable build's artifacts are neither reused nor evicted.
#
# usage: bash .ci/msrv.sh           install the toolchain if needed, then check
#        bash .ci/msrv.sh version   print the toolchain name only (ci.yml's msrv job)
#
# `check` rather than `build` + `test`: what a newer std API or language feature breaks is
# type checking, and it costs a fraction of a build (figures in docs/ci.md). ci.yml's msrv
# job builds and runs the tests with the same toolchain on GitHub's hosted runner.
set -euo pipefail
cd "$(dirname "$0")/.."

# "1.89" in Cargo.toml means 1.89.0 to cargo: name the toolchain the same way, so the check
# runs on the oldest release the statement admits, not the newest 1.89.x patch.
stated=$(sed -n 's/^rust-version = "\([0-9][0-9.]*\)"$/\1/p' Cargo.toml)
case "$stated" in
  *.*.*) toolchain=$stated ;;
  *.*) toolchain=$stated.0 ;;
  *)
    echo 'msrv: Cargo.toml has no `rust-version = "X.Y"` line under [workspace.package];' \
      'state the minimum Rust version there (every member inherits it)' >&2
    exit 2
    ;;
esac
if [ "${1:-}" = version ]; then
  echo "$toolchain"
  exit 0
fi

if ! command -v rustup >/dev/null 2>&1; then
  echo "msrv: rustup is not installed, so Rust $toolchain cannot be installed to check" \
    "Cargo.toml's rust-version; install rustup (https://rustup.rs)" >&2
  exit 2
fi
rustup toolchain install "$toolchain" --profile minimal --no-self-update >&2 || {
  echo "msrv: rustup could not install Rust $toolchain (Cargo.toml's rust-version);" \
    "is static.rust-lang.org reachable?" >&2
  exit 2
}
cargo "+$toolchain" --version

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/msrv"
start=$SECONDS
if ! cargo "+$toolchain" check --workspace --all-targets --locked; then
  cat >&2 <<EOF

msrv: FAILED: the workspace does not compile with Rust $toolchain, the minimum that
Cargo.toml's rust-version ("$stated") promises. The error above names the API or feature
(rustc says "is unstable" or "use of unstable library feature" for what a newer Rust
stabilized). Either keep the code within Rust $toolchain, or raise rust-version in the root
Cargo.toml's [workspace.package] (and README.md's "Rust X.Y or newer") on purpose.
clippy's incompatible_msrv lint (cargo clippy -D warnings) names most such std APIs too.
EOF
  exit 1
fi
echo "msrv: the workspace compiles with Rust $toolchain (Cargo.toml rust-version \"$stated\") in $((SECONDS - start)) s"

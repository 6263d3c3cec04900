#!/usr/bin/env bash
# One runner binary for both GPU vendors (issue 15): the `qsa` that CI builds links no GPU
# runtime at load time (libcuda through cudarc, libamdhip64 through src/backend/hip/ffi.rs,
# both dlopened on first use), starts on a machine without either, and names each target's
# device or the reason there is none.
# Usage: bash .ci/one-runner.sh [path/to/qsa]   (default target/release/qsa)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/release/qsa}"
[ -x "$bin" ] || { echo "error: $bin not built: cargo build --release -p qsa" >&2; exit 2; }

echo "ldd $bin:"
ldd "$bin" | sed 's/^/  /'
if linked=$(ldd "$bin" | grep -Ei 'amdhip|libhsa|librocm|libcuda|libcudart|libnvrtc'); then
    echo "error: $bin links a GPU runtime at load time:" >&2
    echo "$linked" >&2
    echo "a machine without it cannot even start the runner (exit 127 before main): load it at run time (libloading, as src/backend/hip/ffi.rs does)" >&2
    exit 1
fi

echo "$bin devices:"
listed=$("$bin" devices)
echo "$listed" | sed 's/^/  /'
# Every target of matrix.yaml is listed, with its device or a non-empty reason.
targets=$(sed -n '/^targets:/,/^[a-z]/s/^  - name: *\([a-z0-9_]*\).*/\1/p' matrix.yaml)
[ -n "$targets" ] || { echo "error: no targets read from matrix.yaml" >&2; exit 2; }
for t in $targets; do
    if ! echo "$listed" | grep -Eq "^$t +([^ ].*)$"; then
        echo "error: \`$bin devices\` does not list target $t with a device or a reason" >&2
        exit 1
    fi
done
echo "one runner: no GPU runtime linked; every target listed"

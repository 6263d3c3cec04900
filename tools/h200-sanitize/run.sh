#!/usr/bin/env bash
# On the H200 (no cargo), from the repository root with .h200/ (tools/h200-sanitize/prepare.sh):
#   bash tools/h200-sanitize/run.sh mutant OUT
#       the planted out-of-bounds write under memcheck: must exit 1 with
#       "compute-sanitizer memcheck: Invalid __global__ write of size 4 bytes in kernel qsa_topk_register"
#   bash tools/h200-sanitize/run.sh tool TOOL OUT [qsa run filters: --case C --suite S ...]
#       the clean kernels' parity and error suites under one tool: must exit 0
# Results in OUT/<name>/results.yaml, the tool's whole log beside them.
set -uo pipefail
cd "$(dirname "$0")/../.."
h=.h200
if ! command -v compute-sanitizer >/dev/null; then
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin "$PWD/$h/compute-sanitizer"; do
        if [ -x "$d/compute-sanitizer" ]; then export PATH="$d:$PATH"; break; fi
    done
fi
echo "compute-sanitizer: $(command -v compute-sanitizer) ($(compute-sanitizer --version | tail -1))"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mode=${1:?usage: run.sh mutant OUT | run.sh tool TOOL OUT [filters]}
shift
case "$mode" in
mutant)
    out=${1:?OUT}
    $h/qsa run --target sm_90 --matrix matrix.yaml --code-objects $h/kernels-mutant \
        --sanitize memcheck --case topk_edges_small --suite parity --variant register \
        --out "$out/mutant/results.yaml"
    rc=$?
    echo "mutant: qsa exited $rc (want 1)"
    grep -c "compute-sanitizer memcheck: Invalid __global__ write of size 4 bytes in kernel qsa_topk_register" \
        "$out/mutant/results.yaml" | sed 's/^/failed checks naming the planted write: /'
    # Attribution: every one of the case's 8 distributions launches the register kernel, so
    # a check per distribution is expected. One check, on the last distribution, means the
    # tool's reports reached the log late (buffered): rerun with QSA_SANITIZE_LINEBUF=1.
    echo "charged to (case dist):"
    awk '/^  case: /{c=$2} /^  dist: /{d=$2} /^  check: compute-sanitizer/{print "  " c " " d}' \
        "$out/mutant/results.yaml"
    [ "$rc" = 1 ]
    ;;
tool)
    tool=${1:?TOOL}
    out=${2:?OUT}
    shift 2
    start=$(date +%s)
    $h/qsa run --target sm_90 --matrix matrix.yaml --code-objects $h/kernels \
        --sanitize "$tool" --out "$out/$tool/results.yaml" "$@"
    rc=$?
    echo "$tool: qsa exited $rc (want 0) in $(( $(date +%s) - start )) s"
    [ "$rc" = 0 ]
    ;;
*)
    echo "unknown mode $mode: mutant or tool" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Session 11, call G: the golden run of the merged tree (every session-11 branch: tidy,
# dechead, bwdwg, and any default the card flipped in call A).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w; mkdir -p $W/sm_90
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
TAIL=3 run timeout 400 $Q --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep '^  status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 9, call F: the golden run after the TF32 decode scorer's default flip (TMA ring, 4
# slots, two consumer warpgroups; a dispatch change, no kernel changed since call A), and the
# decode scorer's side by side with the new default as `auto`.
set -u
W=/tmp/w; mkdir -p $W/sm_90 $W/f
timeout 300 .h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml 2>&1 | tail -3
grep 'status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
timeout 60 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --shapes 1x64x262144 --out $W/f/sbs-decode 2>&1 | grep -E "262144 \| (torch GEMM|qsa (tf32|bf16)_decode_(wg|tma2?) \((auto|bf16)\))|CHECK"
tar -C $W -czf $OUT/f.tgz f
echo "=== done $(date -u +%T)"

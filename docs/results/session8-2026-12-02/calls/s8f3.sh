#!/usr/bin/env bash
# Session 8, call F3: the golden run again after the backward dispatch fix (5da38a2: the fused
# KV-block-major default only where KV blocks are shared; F1's bench gate caught the decode shapes)
# and the top-k decode default flip (sm_90: the float step, floatX in F1's sweep).
set -u
mkdir -p /tmp/b; tar -C /tmp/b -xzf .h200/snaps/merged.tgz; cd /tmp/b/merged; echo "merged: $(cat COMMIT)"
W=/tmp/w; mkdir -p $W/sm_90
timeout 250 .h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml 2>&1 | tail -3
grep 'status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
timeout 40 python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --quick --out $W/topk_quick.md 2>&1 | tail -8
tar -C $W -czf $OUT/topk.tgz topk_quick.md
echo "=== done $(date -u +%T)"

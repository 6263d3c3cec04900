#!/usr/bin/env bash
# Session 15, call G2 (H200): the golden run again with kvwg2a3 as call B's build C (the row-table
# loads unrolled, the P^T / dS^T row values read once per pair), then the side by side (forward and
# backward, B=4, T=16K, 64 / 4 heads, dim 128; fla 0.6.0 from the carried wheel).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w; mkdir -p $W/sm_90 $W/side
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
TAIL=3 run timeout 300 $Q --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep '^  status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
TAIL=40 run timeout 250 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --fwd-sweep warp --out $W/side
tar -C $W -czf $OUT/side.tgz side
echo "=== done $(date -u +%T)"

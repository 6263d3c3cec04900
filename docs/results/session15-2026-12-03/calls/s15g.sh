#!/usr/bin/env bash
# Session 15, call G (H200): the golden run with kvwg2a3 reading its rows from the row tables
# (call A: 60.74 ms against 66.13 before), then the prefill side by side with fla (forward and
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
# The backward forms beside fla once more (default kvwg2a3 at this shape, kv16s by name).
mkdir -p $W/forms; TAIL=8 run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/forms --forms default,kv16s
tar -C $W -czf $OUT/forms.tgz forms
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 18, call B (H200): the golden run (golden/sm_90, with the new sm_90 case
# attn_prefill_16k_bf16do) and the prefill side by side with fla, whose backward rows now include
# qsa given dO as bf16 (" dO bf16": kvwg2ab), the input fla's backward takes.
# Same build as call A (build/kernels/sm_90 and .h200/qsa at 29b705b).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s18b; mkdir -p $W/sm_90 $W/side
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
TAIL=3 run timeout 330 $Q --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep '^  status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -20
tar -C $W -czf $OUT/s18b.tgz .
TAIL=45 run timeout 240 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --fwd-sweep warp --out $W/side
tar -C $W -czf $OUT/s18b.tgz .
echo "=== done $(date -u +%T)"

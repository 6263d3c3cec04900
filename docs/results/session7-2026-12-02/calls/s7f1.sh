#!/usr/bin/env bash
# Session 7, call F1: the merged tree (b/merged): sm_90 golden run, then the side-by-side
# scores, top-k (FlashInfer carried) and attention benches (fla in the same process).
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-60}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
cd $R/.h200/b/merged; echo "merged: $(cat COMMIT)"; W=/tmp/w; mkdir -p $W/sm_90 $W/scores $W/attn $W/topk
TAIL=4 run timeout 250 .h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep 'status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
TAIL=3 run timeout 80 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/scores
TAIL=12 run timeout 90 python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --flashinfer $R/.flashinfer --out $W/topk/topk_vs_torch.md
tar -C $W -czf $OUT/bench1.tgz scores topk
TAIL=3 run timeout 200 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --out $W/attn
tar -C $W -czf $OUT/bench2.tgz attn
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 8, call F1: the merged tree: sm_90 golden run, then side by side: top-k (sweep,
# FlashInfer carried), scores (full + stability), attention (fla in the same process, --check).
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-40}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
mkdir -p /tmp/b; tar -C /tmp/b -xzf .h200/snaps/merged.tgz; cd /tmp/b/merged; echo "merged: $(cat COMMIT)"
W=/tmp/w; mkdir -p $W/sm_90 $W/scores $W/attn $W/topk
TAIL=4 run timeout 280 .h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep 'status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
S=QSA_TOPK_SPEC
TAIL=22 run timeout 120 python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --quick --flashinfer $R/.flashinfer \
  --sweep "s7:${S}_KEEP=general,${S}_CHUNK=4096" --sweep "lean2k:${S}_CHUNK=2048" --sweep "lean4k:${S}_CHUNK=4096" \
  --sweep "fence1:${S}_KEEP=general,${S}_FENCE=one" --sweep "tmax:${S}_BOUND=tmax" \
  --sweep "leanX:${S}_BOUND=tmax,${S}_FENCE=one,${S}_FINAL=window_lean" \
  --sweep "float:${S}_KEEP=float" --sweep "float4k:${S}_KEEP=float,${S}_CHUNK=4096" \
  --sweep "floatX:${S}_KEEP=float,${S}_FENCE=one,${S}_FINAL=window_lean" \
  --sweep "t1024:${S}_THREADS=1024" --sweep "t1024X:${S}_THREADS=1024,${S}_BOUND=tmax,${S}_FENCE=one,${S}_FINAL=window_lean" \
  --out $W/topk/topk_vs_torch.md
tar -C $W -czf $OUT/topk.tgz topk
TAIL=3 run timeout 100 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/scores/sbs
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 50 > $W/scores/smi.csv 2>&1 & SMI=$!
TAIL=3 run timeout 60 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --stability --out $W/scores/stab
kill $SMI
tar -C $W -czf $OUT/scores.tgz scores
TAIL=3 run timeout 240 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --fwd-sweep warp --decode-sweep new --out $W/attn
tar -C $W -czf $OUT/attn.tgz attn
echo "=== done $(date -u +%T)"

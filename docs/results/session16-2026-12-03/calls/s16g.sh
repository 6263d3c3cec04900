#!/usr/bin/env bash
# Session 16, call G (H200): (1) the side by side of all four issue-13 rows in one session with
# the committed kernels (build/ab/A/sm_90: HEAD's selection_attention, built by `cargo xtask
# build --target sm_90`): prefill forward and backward (B=4, T=16K, 64 / 4 heads, dim 128; fla
# 0.6.0 from the carried wheel, tuned at that shape: FLA_CACHE_RESULTS=0), then the decode
# shapes. (2) Leave-one-out probes of kvwg2a3, the bf16 default backward at the prefill shape
# (calls/ablate.patch, each cubin built here with `nvcc -cubin -arch=sm_90a -O3 -Ikernels
# -DQSA_KWG_ABLATE=N kernels/selection_attention.cu`; P0 the same command without the macro):
#   P1 no dQ at all; P2 dQ's products, no atomics; P3 no q / dO copies after each warpgroup's
#   first tile of a chunk; P4 no P^T / dS^T (exp, split, stores). Numbers from the probes are
#   wrong by construction; only their times mean something. P0 again last for drift.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s16g; mkdir -p $W/side $W/decode
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
TAIL=40 run timeout 220 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/ab/A/sm_90 --check --bench --prefill-only --fwd-sweep warp --out $W/side
TAIL=30 run timeout 120 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/ab/A/sm_90 --bench --decode-only --out $W/decode
for p in P0 P1 P2 P3 P4 P0b; do
  mkdir -p $W/$p
  TAIL=6 run timeout 90 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/ab/${p%b}/sm_90 --out $W/$p --forms default
done
tar -C $W -czf $OUT/s16g.tgz .
echo "=== done $(date -u +%T)"

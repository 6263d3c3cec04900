#!/usr/bin/env bash
# Session 21, call A (H200): issue 13's four rows once more, all in ONE call on the submitted build
# (208de81; kernels unchanged since session 20's call E, resources equal to golden/sm_90), each
# beside its peer in the same run:
#  1. prefill forward and backward (B=4, T=16K, 64 / 4 heads, dim 128, 16 blocks of 64), FP64
#     check then bench, fla 0.6.0 from the carried wheel (FLA_CACHE_RESULTS=0: tuned at the shape);
#  2. the decode shapes with the chain probes (`--decode-sweep lean`: launch, list, loop, no_math,
#     cta, cluster), torch gather+sdpa in the same run;
#  3. bench/hbm_floor.py: the decode's K/V bytes read by the bare reader (bench/kernels/hbm_read.cu,
#     build/bench/hbm_read.cubin from session 19) beside qsa's decode.
# Carried: build/kernels/sm_90 (`cargo xtask build --target sm_90`), .h200/qsa (`strip -o .h200/qsa
# target/release/qsa`), .h200/wheels, build/bench.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH FLA_CACHE_RESULTS=0
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=$OUT/s21a; mkdir -p $W/prefill $W/decode $W/floor
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
TAIL=45 run timeout 260 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --fwd-sweep warp --out $W/prefill
TAIL=60 run timeout 130 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep lean --out $W/decode
TAIL=30 run timeout 150 python3 bench/hbm_floor.py --qsa .h200/qsa --kernels build/kernels/sm_90 --reader build/bench --out $W/floor
echo "=== done $(date -u +%T)"

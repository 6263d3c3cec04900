#!/usr/bin/env bash
# Session 19, call A (H200): issue 13's decode rows re-measured, and the read floor under them.
#  1. The decode side by side with the chain and merge probes (`--decode-sweep lean`: launch,
#     list, loop, no_math, cta, cluster), torch gather+sdpa in the same run.
#  2. bench/hbm_floor.py: qsa's decode (auto, and its copies alone) beside the same K/V bytes
#     read by the plainest fast reader (bench/kernels/hbm_read.cu) in the decode's own pattern,
#     head-major blocks and one contiguous stretch.
# Carried: build/kernels/sm_90 and .h200/qsa (session 18's build, 29b705b: no kernel or launch
# change since), build/bench/hbm_read.cubin (nvcc 13.0.88 here:
# `nvcc -cubin -arch=sm_90 -O3 -Xptxas -warn-spills -Werror all-warnings`).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
W=/tmp/s19a; mkdir -p $W/floor $W/side/a $W/side/b
TAIL=80 run timeout 200 python3 bench/hbm_floor.py --qsa .h200/qsa --kernels build/kernels/sm_90 --reader build/bench --out $W/floor
tar -C $W -czf $OUT/s19a.tgz .
for r in a b; do  # twice: the flip rules ask for two steady readings
  TAIL=150 run timeout 120 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep lean --out $W/side/$r
done
tar -C $W -czf $OUT/s19a.tgz .
echo "=== done $(date -u +%T)"

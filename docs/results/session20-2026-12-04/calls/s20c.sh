#!/usr/bin/env bash
# Session 20, call C (H200): call B's timeline again with each step's own time per CTA (the CTA's
# last warp at the step minus at the step before: median and largest over CTAs) and the spread of
# a CTA's warps' loop ends: auto, O's dims split over warp pairs, and the dynamic unit order.
# Carried: as call B (build/trace from the same source, .h200/qsa).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p $OUT/c
T="python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace"
TAIL=80 run timeout 200 $T | tee $OUT/c/auto.md
TAIL=80 run timeout 200 $T --switch QSA_ATTN_DEC_DIMS=half | tee $OUT/c/dims-half.md
TAIL=80 run timeout 200 $T --switch QSA_ATTN_DEC_ORDER=dynamic | tee $OUT/c/order-dynamic.md
echo "=== done $(date -u +%T)"

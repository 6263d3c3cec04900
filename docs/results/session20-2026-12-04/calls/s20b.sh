#!/usr/bin/env bash
# Session 20, call B (H200): the decode's timeline, step by step (tools/h200-decode-trace): every
# warp's %globaltimer at entry, list ready, first unit landed, loop end, the CTA merge's barriers
# and end, the cluster barrier and the end; auto's plans, then with O's dims split over warp pairs.
# Carried: build/trace/selection_attention.cubin (`nvcc -cubin -arch=sm_90a -O3 -Ikernels
# -DQSA_DEC_TRACE -Werror all-warnings kernels/selection_attention.cu`, nvcc 13.0.88 here) and
# .h200/qsa (this commit's release runner).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p $OUT/b
TAIL=80 run timeout 200 python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace | tee $OUT/b/auto.md
TAIL=80 run timeout 200 python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace --switch QSA_ATTN_DEC_DIMS=half | tee $OUT/b/dims-half.md
echo "=== done $(date -u +%T)"

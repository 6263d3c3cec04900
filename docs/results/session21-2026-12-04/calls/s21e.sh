#!/usr/bin/env bash
# Session 21, call E (H200): tools/h200-decode-trace/trace.py on the card after this session's
# change (each table's header now gives the clock's step read from the stamps). build/trace:
# nvcc -cubin -arch=sm_90a -O3 -Ikernels -DQSA_DEC_TRACE -Werror all-warnings
#   kernels/selection_attention.cu -o build/trace/selection_attention.cubin (nvcc 13.0.88 here).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/e
timeout 200 python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace > $OUT/e/auto.md 2>&1
echo "### rc=$?"; cat $OUT/e/auto.md

#!/usr/bin/env bash
# Session 17, call C (H200): session 16's probes found that the q / dO copies and dQ's atomics
# each cost ~13 ms only in the other's presence (P2 no atomics 44.09, P3 no copies 43.40, P0
# 56.69). A guess: a tile's REDs, issued at its end, queue ahead of the next tile's copies.
# build/ab/D/sm_90: -DQSA_KWG_DQ_FIRST (dQ's products and atomics before dV / dK, so that the
# REDs drain during those products). Forms bench A / D / A / D (errors vs FP64 first).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s17c; mkdir -p $W
for b in A:build/kernels/sm_90 D:build/ab/D/sm_90 A2:build/kernels/sm_90 D2:build/ab/D/sm_90; do
  mkdir -p $W/${b%%:*}
  TAIL=${T:-6} run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels ${b#*:} --out $W/${b%%:*} --forms default,q2048
done
tar -C $W -czf $OUT/s17c.tgz .
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 17, call E (H200): the default range under the committed kernel (dQ first). Call C
# timed only 2,048-token ranges with dQ first; here the forms bench times the default
# (2,048), no ranges, and 1,024 / 4,096 / 8,192, with build/kernels/sm_90 as call D's.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s17e; mkdir -p $W
TAIL=12 run timeout 200 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,qoff,q1024,q4096,q8192
tar -C $W -czf $OUT/s17e.tgz .
echo "=== done $(date -u +%T)"

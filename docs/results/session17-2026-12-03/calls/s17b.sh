#!/usr/bin/env bash
# Session 17, call B (H200): call A found query ranges worth 2% at most (q2048 55.08 ms against
# 56.26 / 57.32): dQ's atomics do not cost HBM misses. This call asks whether they cost their
# return values: CUDA's atomicAdd(float4*) is atom.global.add.v4.f32 in the PTX (162 of them in
# selection_attention), whose results ptxas may keep live. build/ab/R/sm_90: the same source
# with -DQSA_KWG_DQ_RED (kwg_add4 as red.global.add.v4.f32, no result). SASS counts of both,
# the forms bench (errors vs FP64 first) with each build, A / R / A / R.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s17b; mkdir -p $W
for b in A:build/kernels/sm_90 R:build/ab/R/sm_90; do
  echo "== ${b%%:*} SASS of qsa_attn_kvwg2a3_dq_bwd_bf16"
  cuobjdump -sass -fun qsa_attn_kvwg2a3_dq_bwd_bf16 ${b#*:}/selection_attention.cubin > $W/${b%%:*}.sass
  grep -oE "\b(ATOMG|REDG|ATOM|RED)\.[A-Z0-9._]*" $W/${b%%:*}.sass | sort | uniq -c
done
for b in A:build/kernels/sm_90 R:build/ab/R/sm_90 A2:build/kernels/sm_90 R2:build/ab/R/sm_90; do
  mkdir -p $W/${b%%:*}
  TAIL=5 run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels ${b#*:} --out $W/${b%%:*} --forms default,q2048
done
tar -C $W -czf $OUT/s17b.tgz .
echo "=== done $(date -u +%T)"

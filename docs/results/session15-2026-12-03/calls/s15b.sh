#!/usr/bin/env bash
# Session 15, call B (H200): two more cuts of kvwg2a3's non-mma instructions, A/B in one run.
#   A  build/ab/A/sm_90: as committed (row tables, call G: 60.60 ms).
#   B  build/ab/B/sm_90: A with kwg_issue's CM copy loops unrolled at fixed trip counts (the
#      row-table loads issued together, not one shared-memory latency per copy).
#   C  build/kernels/sm_90: B with the P^T / dS^T step reading each row pair's lse, position and
#      D once per j as 8-byte pairs, not per element.
# C's correctness: the forms cases' error suite and racecheck on it. Then the forms bench
# (default = kvwg2a3 at this shape, kv16s by name) with each build, A again last for drift.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s15b; mkdir -p $W
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 --variant kvwg2a3_bwd --variant kvwg2a_bwd --out $W/racecheck-C.yaml
TAIL=3 run timeout 90 $Q --suite error $F $C --variant auto --variant kvwg2a_bwd --variant kvwg2a3_bwd --out $W/error-forms-C.yaml
grep '^  status:' $W/error-forms-C.yaml | sort | uniq -c
for b in A:build/ab/A/sm_90 B:build/ab/B/sm_90 C:build/kernels/sm_90 A2:build/ab/A/sm_90; do
  mkdir -p $W/${b%%:*}
  TAIL=5 run timeout 120 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels ${b#*:} --out $W/${b%%:*} --forms default,kv16s
done
tar -C $W -czf $OUT/s15b.tgz .
echo "=== done $(date -u +%T)"

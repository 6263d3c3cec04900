#!/usr/bin/env bash
# Session 16, call R (H200): a probe of call G's finding (dQ's float4 atomics cost 12.6 of
# kvwg2a3's 56.7 ms). R = P0 with calls/bulk-dq.patch (-DQSA_KWG_BULK_DQ): each dQ half staged
# in shared memory (over q, then over P^T) and added by the TMA unit, one
# cp.reduce.async.bulk .add.f32 of 256 bytes per row, instead of per-thread float4 atomics.
# Both cubins built here by `nvcc -cubin -arch=sm_90a -O3 -Ikernels [-DQSA_KWG_BULK_DQ]`.
# R's correctness: the forms cases' error suite and racecheck through the runner; then the
# forms bench P0, R, P0, R (fla tuned at the prefill shape first).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s16r; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/ab/R --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_causal_g16"
TAIL=3 run timeout 90 $Q --suite error $F $C --variant kvwg2a3_bwd --out $W/error-forms.yaml
grep '^  status:' $W/error-forms.yaml | sort | uniq -c
grep -E "status: (fail|crashed)" -B8 $W/error-forms.yaml | grep -E "case:|variant:|check:|message:" | head -20
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error $F --case attn_kvf_g4 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/memcheck.yaml
for p in P0 R P0b Rb; do
  mkdir -p $W/$p
  TAIL=6 run timeout 90 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/ab/${p%b}/sm_90 --out $W/$p --forms default
done
tar -C $W -czf $OUT/s16r.tgz .
echo "=== done $(date -u +%T)"

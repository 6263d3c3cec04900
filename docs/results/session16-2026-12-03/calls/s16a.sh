#!/usr/bin/env bash
# Session 16, call A (H200): kvwg2a3 with q a tile ahead (QAHEAD: the next tile's q rows copied
# during this tile's dQ, so a tile's start waits on its dO rows only), A/B in one run.
#   A  build/ab/A/sm_90: as committed before (session 15's build C, call G2: 56.32 ms).
#   B  build/kernels/sm_90: A with QAHEAD.
# B's correctness: the forms cases' error suite; racecheck, synccheck and memcheck on
# kvwg2a3 (synccheck and memcheck were not re-run on session 15's build C). Then the forms
# bench (default = kvwg2a3 at this shape, kv16s by name) with each build, A again last for drift.
# From the repo root with .h200/qsa and both builds made from this commit; $OUT the output folder.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s16a; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 --variant kvwg2a3_bwd --out $W/san/racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error $F --case attn_kvf_g4 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/memcheck.yaml
TAIL=3 run timeout 90 $Q --suite error $F $C --variant auto --variant kvwg2a_bwd --variant kvwg2a3_bwd --out $W/error-forms.yaml
grep '^  status:' $W/error-forms.yaml | sort | uniq -c
grep -E "status: (fail|crashed)" -B8 $W/error-forms.yaml | grep -E "case:|variant:|check:|message:" | head -20
bwd_errors() { awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' "$1"; }
TAIL=3 run timeout 200 $Q --suite error $F --case attn_kvf_prefill_16k --variant kvwg2a3_bwd --out $W/e16k.yaml
bwd_errors $W/e16k.yaml
for b in A:build/ab/A/sm_90 B:build/kernels/sm_90 A2:build/ab/A/sm_90 B2:build/kernels/sm_90; do
  mkdir -p $W/${b%%:*}
  TAIL=5 run timeout 120 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels ${b#*:} --out $W/${b%%:*} --forms default
done
tar -C $W -czf $OUT/s16a.tgz .
echo "=== done $(date -u +%T)"

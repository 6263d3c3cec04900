#!/usr/bin/env bash
# Session 14, call A (H200): the three-part wgmma backward qsa_attn_kvwg2a3_dq_bwd_bf16
# (QSA_ATTN_KV_MMA=wg2a, QSA_ATTN_KV_DP_PARTS=3; kernels/common/attention_kv_wg.h): the three
# sanitizers, the forms cases' error suite, the T=16K error case that every two-part form failed
# (session 13 call E), the row-count sweep for a shape rule (attn_kvf_rows_*), and the prefill
# bench beside the default and fla. From the repo root with .h200/qsa and build/kernels/sm_90
# built from this commit; $OUT the output folder.
# Decides: wg2a3 is a default candidate when it passes every error unit and sanitizer, beats
# kv16s by >= 3% in the prefill bench, and a row-count rule keeps it off the short grids.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s14a; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
V="--variant kvwg2a3_bwd"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=4 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 $V --out $W/san/racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks $V --out $W/san/synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error $F --case attn_kvf_g4 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks $V --out $W/san/memcheck.yaml
TAIL=4 run timeout 90 $Q --suite error $F $C --variant auto --variant kvwg2a_bwd $V --out $W/error-forms.yaml
grep '^  status:' $W/error-forms.yaml | sort | uniq -c
grep -E "status: (fail|crashed)" -B8 $W/error-forms.yaml | grep -E "case:|variant:|check:|message:" | head -20
bwd_errors() { awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' "$1"; }
TAIL=4 run timeout 200 $Q --suite error $F --case attn_kvf_prefill_16k --variant auto $V --out $W/e16k.yaml
bwd_errors $W/e16k.yaml
TAIL=4 run timeout 200 $Q --suite bench $F --case attn_kvf_rows_16 --case attn_kvf_rows_128 --case attn_kvf_rows_1024 --case attn_kvf_rows_8192 --out $W/rows.yaml
awk '/^- suite:/{if(c=="bwd")print cs, v, m; cs=v=c=m=""} /^  case:/{cs=$2} /^  variant:/{v=$2} /^  check:/{c=$2} /^    median_us:/{m=$2} END{if(c=="bwd")print cs, v, m}' $W/rows.yaml
TAIL=12 run timeout 240 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,wg2a,wg2a3
tar -C $W -czf $OUT/s14a.tgz .
echo "=== done $(date -u +%T)"

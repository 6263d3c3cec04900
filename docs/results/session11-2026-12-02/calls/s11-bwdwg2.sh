#!/usr/bin/env bash
# Session 11, branch bwdwg2: the wgmma backward with two warpgroups per CTA (QSA_ATTN_KV_MMA=wg2)
# beside wg and the default: error suite, racecheck on two forms cases, the bench. From the repo
# root of bwdwg2; $OUT the output folder. H200.md says what each step decides.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/wg2; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=6 run timeout 60 $Q --suite error --cases examples/cases/attn-kv16-forms.yaml $C --variant auto --variant kvwg_bwd --variant kvwg2_bwd --out $W/error-wg2.yaml
grep -E "status: (fail|crashed)" -B8 $W/error-wg2.yaml | grep -E "case:|variant:|check:|message:" | head -20
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg_bwd --variant kvwg2_bwd --out $W/san/wg2-racecheck.yaml
TAIL=30 run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,wg,wg2
tar -C $W -czf $OUT/wg2.tgz .
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 12, branch wg2r: the two-warpgroup wgmma backward rebuilt (QSA_ATTN_KV_MMA=wg2, with
# catch-up barriers that give both warpgroups the same barrier count per chunk: the fix for call
# C's racecheck hazard) and wg2a (wg2 with dO landing chunk-major: a conflict-free split). The
# three sanitizers, the error suite, the bench. From the repo root of wg2r, with .h200/qsa and
# build/kernels/sm_90 built from it; $OUT the output folder. H200.md says what each step decides.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/wg2r; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
V="--variant kvwg2_bwd --variant kvwg2a_bwd"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
# 1. racecheck (the open question), synccheck, memcheck on the forms cases of call C (+ g4, causal_g16 for racecheck).
TAIL=4 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 $V --out $W/san/wg2r-racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks $V --out $W/san/wg2r-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error $F --case attn_kvf_g4 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks $V --out $W/san/wg2r-memcheck.yaml
# 2. The error suite, every forms case, beside auto.
TAIL=4 run timeout 90 $Q --suite error $F $C --variant auto $V --out $W/error-wg2r.yaml
grep '^  status:' $W/error-wg2r.yaml | sort | uniq -c
grep -E "status: (fail|crashed)" -B8 $W/error-wg2r.yaml | grep -E "case:|variant:|check:|message:" | head -20
# 3. The bench (B=4, T=16K, 64 / 4 heads): fla, default, wg2, wg2a, default again.
TAIL=12 run timeout 200 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,wg2,wg2a
tar -C $W -czf $OUT/wg2r.tgz .
echo "=== done $(date -u +%T)"

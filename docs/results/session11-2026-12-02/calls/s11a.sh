#!/usr/bin/env bash
# Session 11, call A: the two new forms beside their defaults and peers (plans/bwdwg.md,
# plans/dechead.md): the wgmma backward (QSA_ATTN_KV_MMA=wg / wgp) and the decode's q staged
# once per CTA (QSA_ATTN_DEC_QLOAD=cta), their error suites and sanitizers. From the repo root
# of the merged tree (3c8dbbf); $OUT the output folder.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/wg; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
# bwdwg 1: the runner's error suite, both forms and the default, every forms case
TAIL=6 run timeout 60 $Q --suite error --cases examples/cases/attn-kv16-forms.yaml $C --variant auto --variant kvwg_bwd --variant kvwgp_bwd --out $W/error-wg.yaml
grep -E "status: (fail|crashed)" -B8 $W/error-wg.yaml | grep -E "case:|variant:|check:|message:" | head -20
# bwdwg 2: sanitizers on the emulator-size cases
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg_bwd --variant kvwgp_bwd --out $W/san/wg-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize memcheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --case attn_kvf_g32 --variant kvwg_bwd --variant kvwgp_bwd --out $W/san/wg-memcheck.yaml
TAIL=3 run timeout 30 $Q --sanitize synccheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --variant kvwg_bwd --variant kvwgp_bwd --out $W/san/wg-synccheck.yaml
# bwdwg 3: prefill B=4 T=16K 64/4 heads 16 blocks: default, wg, wgp, default again, fla
TAIL=30 run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,wg,wgp
tar -C $W -czf $OUT/wg.tgz .
# dechead: calls/dechead.sh (the qs sweep, its error suite, three sanitizers)
bash docs/results/session11-2026-12-02/calls/dechead.sh
echo "=== done $(date -u +%T)"

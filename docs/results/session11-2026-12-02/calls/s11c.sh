#!/usr/bin/env bash
# Session 11, call C: wg2 after its CTA barriers became barrier.sync 3 without .aligned (call B's
# synccheck: "divergent threads" at bar.sync 0, reached by the two warpgroups' instantiations at
# different instructions; racecheck: 1 hazard). The three sanitizers, its error suite, the bench.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/wg2c; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=3 run timeout 40 $Q --sanitize synccheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2_bwd --out $W/san/wg2-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2_bwd --out $W/san/wg2-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize memcheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --case attn_kvf_g32 --variant kvwg2_bwd --out $W/san/wg2-memcheck.yaml
TAIL=4 run timeout 60 $Q --suite error --cases examples/cases/attn-kv16-forms.yaml $C --variant kvwg2_bwd --out $W/error-wg2.yaml
grep '^  status:' $W/error-wg2.yaml | sort | uniq -c
TAIL=12 run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,wg2
tar -C $W -czf $OUT/wg2c.tgz .
echo "=== done $(date -u +%T)"

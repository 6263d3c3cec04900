#!/usr/bin/env bash
# Session 18, call A (H200): dO given as bf16 (`do_dtype: bf16`). kvwg2ab (the fused wg2a
# backward reading bf16 dO natively: one dP product, no split) and the widening path.
# build/kernels/sm_90 by `cargo xtask build --target sm_90` at this commit; .h200/qsa its runner.
#   1. error suite: the bf16-dO forms cases (auto / kvwg2a3_bwd / kvwg2a3q64_bwd natively,
#      kvwg_bwd widened) and the f32-dO forms cases with auto (unchanged kernels);
#   2. the three sanitizers on the bf16-dO cases;
#   3. attn_kvf_prefill_16k_bf16do (32 rows vs FP64);
#   4. bench/attn_bwd_forms.py: default (f32 dO), bf16do (kvwg2ab), bf16do-kv16s (widened) vs fla.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s18a; mkdir -p $W/san $W/forms
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
B="--case attn_kvf_bf16do --case attn_kvf_g1_bf16do"
TAIL=3 run timeout 90 $Q --suite error $F $B --variant auto --variant kvwg2a3_bwd --variant kvwg2a3q64_bwd --variant kvwg_bwd --out $W/error-bf16do.yaml
grep '^  status:' $W/error-bf16do.yaml | sort | uniq -c
grep -E "status: (fail|crashed|error)" -B8 -A8 $W/error-bf16do.yaml | grep -E "case:|variant:|message:" | head -12
C="--case attn_kvf_qranges --case attn_kvf_g4 --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16"
TAIL=3 run timeout 90 $Q --suite error $F $C --variant auto --out $W/error-f32do.yaml
grep '^  status:' $W/error-f32do.yaml | sort | uniq -c
S="$B --variant auto --variant kvwg2a3q64_bwd --variant kvwg_bwd"
for tool in racecheck synccheck memcheck; do
  TAIL=2 run timeout 120 $Q --sanitize $tool --suite error $F $S --out $W/san/$tool.yaml
done
bwd_errors() { awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' "$1"; }
TAIL=2 run timeout 150 $Q --suite error $F --case attn_kvf_prefill_16k_bf16do --variant auto --variant kvwg_bwd --out $W/e16k.yaml
bwd_errors $W/e16k.yaml
tar -C $W -czf $OUT/s18a.tgz .
TAIL=40 run timeout 220 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --forms default,bf16do,bf16do-kv16s --out $W/forms
tar -C $W -czf $OUT/s18a.tgz .
echo "=== done $(date -u +%T)"

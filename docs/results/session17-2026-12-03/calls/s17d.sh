#!/usr/bin/env bash
# Session 17, call D (H200): the committed form. kvwg2a3 with dQ's products first in the tile,
# and the default path's 2,048-token query ranges (KV_WG_DEFAULT_QCHUNK) where q_len > 2,048.
# build/kernels/sm_90 by `cargo xtask build --target sm_90` at this commit; .h200/qsa its runner.
#   1. error suite of the forms cases (auto, kvwg2a3_bwd, kvwg2a3q64_bwd) and the three
#      sanitizers on kvwg2a3 (one range) and kvwg2a3q64 (ranges);
#   2. attn_kvf_prefill_16k (32 rows vs FP64) with auto (kvwg2a3/q2048);
#   3. the golden run (golden/sm_90);
#   4. the prefill side by side with fla (forward and backward).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s17d; mkdir -p $W/san $W/sm_90 $W/side
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
C="--case attn_kvf_qranges --case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=3 run timeout 90 $Q --suite error $F $C --variant auto --variant kvwg2a3_bwd --variant kvwg2a3q64_bwd --out $W/error-forms.yaml
grep '^  status:' $W/error-forms.yaml | sort | uniq -c
grep -E "status: (fail|crashed|error)" -B8 -A8 $W/error-forms.yaml | grep -E "case:|variant:|message:" | head -12
S="--case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_qranges --variant kvwg2a3_bwd --variant kvwg2a3q64_bwd"
for tool in racecheck synccheck memcheck; do
  TAIL=2 run timeout 120 $Q --sanitize $tool --suite error $F $S --out $W/san/$tool.yaml
done
bwd_errors() { awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' "$1"; }
TAIL=2 run timeout 120 $Q --suite error $F --case attn_kvf_prefill_16k --variant auto --out $W/e16k.yaml
bwd_errors $W/e16k.yaml
TAIL=3 run timeout 300 $Q --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep '^  status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -20
tar -C $W -czf $OUT/s17d.tgz .
TAIL=40 run timeout 200 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --fwd-sweep warp --out $W/side
tar -C $W -czf $OUT/s17d.tgz .
echo "=== done $(date -u +%T)"

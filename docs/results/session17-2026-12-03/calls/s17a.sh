#!/usr/bin/env bash
# Session 17, call A (H200): query ranges for the wgmma backward (QSA_ATTN_KV_QCHUNK, kwg_bwd's
# qchunk): one CTA per (batch, KV head, range, block), so that the CTAs resident together add
# dQ into one range's rows (in L2) rather than rows spread over the sequence (session 16: dQ's
# atomics 12.6 of 56.7 ms). build/kernels/sm_90 from this commit (`cargo xtask build --target
# sm_90`), .h200/qsa the stripped runner of this commit.
#   1. error suite of the range variant (kvwg2a3q64_bwd: 64-token ranges) on the forms cases
#      that cross ranges, beside auto and kvwg2a3_bwd; then the three sanitizers on it.
#   2. the forms bench at the prefill shape: default (kvwg2a3, no ranges), q256 .. q4096,
#      default again (drift); fla side by side, tuned at that shape.
#   3. attn_kvf_prefill_16k (32 rows vs FP64) with kvwg2a3q64_bwd and kvwg2a3_bwd.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s17a; mkdir -p $W/san $W/forms
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
C="--case attn_kvf_qranges --case attn_kvf_g1_two_chunks --case attn_kvf_causal_g16 --case attn_kvf_g16_f16"
TAIL=3 run timeout 120 $Q --suite error $F $C --variant auto --variant kvwg2a3_bwd --variant kvwg2a3q64_bwd --out $W/error-q.yaml
grep '^  status:' $W/error-q.yaml | sort | uniq -c
grep -E "status: (fail|crashed|error)" -B8 -A8 $W/error-q.yaml | grep -E "case:|variant:|check:|message:" | head -20
TAIL=3 run timeout 120 $Q --sanitize racecheck --suite error $F --case attn_kvf_qranges --case attn_kvf_g1_two_chunks --variant kvwg2a3q64_bwd --out $W/san/racecheck.yaml
TAIL=3 run timeout 90 $Q --sanitize synccheck --suite error $F --case attn_kvf_qranges --case attn_kvf_g1_two_chunks --variant kvwg2a3q64_bwd --out $W/san/synccheck.yaml
TAIL=3 run timeout 90 $Q --sanitize memcheck --suite error $F --case attn_kvf_qranges --case attn_kvf_g1_two_chunks --variant kvwg2a3q64_bwd --out $W/san/memcheck.yaml
TAIL=40 run timeout 300 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/forms --forms default,q256,q512,q1024,q2048,q4096
bwd_errors() { awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' "$1"; }
TAIL=3 run timeout 200 $Q --suite error $F --case attn_kvf_prefill_16k --variant kvwg2a3_bwd --variant kvwg2a3q64_bwd --out $W/e16k.yaml
bwd_errors $W/e16k.yaml
tar -C $W -czf $OUT/s17a.tgz .
echo "=== done $(date -u +%T)"

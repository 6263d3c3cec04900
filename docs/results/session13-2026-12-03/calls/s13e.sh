#!/usr/bin/env bash
# Session 13, call E (H200): the backward forms' errors at the issue-13 prefill shape
# (attn_kvf_prefill_16k: B=4, T=16K, 64 / 4 heads, 32 rows against FP64), to tell whether
# wg2a's dk 8.9e-5 (call G1) is the two-part dO (then kvdq16sp2, wg and wgp show it too) or the
# two-warpgroup form (then only wg2 / wg2a).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
W=/tmp/w; mkdir -p $W
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
TAIL=4 run timeout 400 $Q --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_prefill_16k --out $W/e16k.yaml
awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' $W/e16k.yaml
cp $W/e16k.yaml $OUT/
echo "=== done $(date -u +%T)"

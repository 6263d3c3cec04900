#!/usr/bin/env bash
# Session 16, call S (H200): the sanitizers on HEAD's kvwg2a3 (session 15's build C, built by
# `cargo xtask build --target sm_90` at a843e6c; call A's sanitizer runs had QAHEAD's build):
# racecheck, synccheck and memcheck through the runner on the forms cases.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/s16s; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/ab/A --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 --variant kvwg2a3_bwd --out $W/san/racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error $F --case attn_kvf_g4 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/memcheck.yaml
find $W -name "*.journal.yaml" -delete
tar -C $W -czf $OUT/s16s.tgz .
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 11, call B: bwdwg2's two-warpgroup wgmma backward (QSA_ATTN_KV_MMA=wg2) beside wg and
# the default (calls/s11-bwdwg2.sh: error suite, racecheck, bench), plus its memcheck and
# synccheck; then the golden run of the final merged tree (bwdwg2, emuoob added since call G).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
bash docs/results/session11-2026-12-02/calls/s11-bwdwg2.sh
mkdir -p /tmp/wg2/san
TAIL=3 run timeout 40 $Q --sanitize memcheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --case attn_kvf_g32 --variant kvwg2_bwd --out /tmp/wg2/san/wg2-memcheck.yaml
TAIL=3 run timeout 30 $Q --sanitize synccheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2_bwd --out /tmp/wg2/san/wg2-synccheck.yaml
tar -C /tmp/wg2 -czf $OUT/wg2.tgz .
bash docs/results/session11-2026-12-02/calls/s11g.sh
echo "=== done $(date -u +%T)"

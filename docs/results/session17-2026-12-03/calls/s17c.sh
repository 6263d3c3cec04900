#!/usr/bin/env bash
# Session 17, call C (H200): session 16's probes found that the q / dO copies and dQ's atomics
# each cost ~13 ms only in the other's presence (P2 no atomics 44.09, P3 no copies 43.40, P0
# 56.69). A guess: a tile's REDs, issued at its end, queue ahead of the next tile's copies, whose
# latency the tile then waits out. Two probes of the source at this commit:
#   D  build/ab/D/sm_90: -DQSA_KWG_DQ_FIRST (dQ's products and atomics before dV / dK, so that
#      the REDs drain during those products);
#   H  build/ab/H/sm_90: -DQSA_KWG_AHEAD (tile n + 2's q / dO copies issued inside tile n, after
#      its dS fragments are in registers, before dQ's products and atomics).
# Forms bench A / D / H / A / D / H (errors vs FP64 first, T=1024 and 2048), then racecheck and
# synccheck of H's kvwg2a3 on the forms cases.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s17c; mkdir -p $W/san
for b in A:build/kernels/sm_90 D:build/ab/D/sm_90 H:build/ab/H/sm_90 A2:build/kernels/sm_90 D2:build/ab/D/sm_90 H2:build/ab/H/sm_90; do
  mkdir -p $W/${b%%:*}
  TAIL=${T:-6} run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels ${b#*:} --out $W/${b%%:*} --forms default,q2048
done
cp -n build/kernels/sm_90/* build/ab/H/sm_90/ 2>/dev/null
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/ab/H --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
TAIL=3 run timeout 120 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 --variant kvwg2a3_bwd --out $W/san/racecheck.yaml
TAIL=3 run timeout 90 $Q --sanitize synccheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvwg2a3_bwd --out $W/san/synccheck.yaml
TAIL=3 run timeout 90 $Q --suite error $F --case attn_kvf_qranges --case attn_kvf_g1_two_chunks --case attn_kvf_causal_g16 --case attn_kvf_g4 --variant kvwg2a3_bwd --variant kvwg2a3q64_bwd --out $W/error-h.yaml
grep '^  status:' $W/error-h.yaml | sort | uniq -c
tar -C $W -czf $OUT/s17c.tgz .
echo "=== done $(date -u +%T)"

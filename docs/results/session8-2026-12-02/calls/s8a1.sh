#!/usr/bin/env bash
# Session 8, call A1: branches attnfwd and attnbwd (each engineer's H200.md step 1 / 2),
# fla's backward kernels under ncu. Snapshots carried as .h200/snaps/<branch>.tgz.
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-40}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
mkdir -p /tmp/b; for f in .h200/snaps/*.tgz; do tar -C /tmp/b -xzf $f; done
W=/tmp/w; mkdir -p $W/attnfwd $W/attnbwd $W/prof
echo "======== attnfwd $(cat /tmp/b/attnfwd/COMMIT)"; cd /tmp/b/attnfwd
TAIL=45 run timeout 200 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --fwd-sweep warp --out $W/attnfwd
TAIL=3 run timeout 60 .h200/qsa run --target sm_90 --quiet --suite error --case attn_emu_g4 --case attn_emu_g8_f16 --case attn_edges_g8_f16 --case attn_edges_g16 --case attn_causal_start --case attn_causal_g16_f16 --case attn_prefill_16k --variant gather --variant warp_fwd --variant warp_fwd_x --out $W/attnfwd/error.yaml
grep 'status:' $W/attnfwd/error.yaml | sort | uniq -c
tar -C $W -czf $OUT/attnfwd.tgz attnfwd
echo "======== attnbwd $(cat /tmp/b/attnbwd/COMMIT)"; cd /tmp/b/attnbwd
TAIL=45 run timeout 250 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --out $W/attnbwd
TAIL=3 run timeout 60 .h200/qsa run --target sm_90 --quiet --code-objects build/kernels --suite error --cases examples/cases/attn-kv16.yaml --case attn_kv16_g4 --case attn_kv16_g16 --case attn_kv16_g32 --case attn_kv16_g1_two_chunks --case attn_kv16_g16_f16 --case attn_kv16_causal_g16 --out $W/attnbwd/error-kv16.yaml
grep 'status:' $W/attnbwd/error-kv16.yaml | sort | uniq -c
tar -C $W -czf $OUT/attnbwd.tgz attnbwd
cd /tmp/b/attnbwd
TAIL=3 run timeout 120 ncu --clock-control none --set full --import-source no -f --profile-from-start off -o $W/prof/fla_bwd python3 $R/.h200/fla_bwd_once.py
ncu -i $W/prof/fla_bwd.ncu-rep --page details > $W/prof/fla_bwd.txt 2>&1; ncu -i $W/prof/fla_bwd.ncu-rep --page raw --csv > $W/prof/fla_bwd.raw.csv 2>&1
rm -f $W/prof/*.ncu-rep; tar -C $W -czf $OUT/prof.tgz prof
echo "=== done $(date -u +%T)"

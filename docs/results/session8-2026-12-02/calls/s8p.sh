#!/usr/bin/env bash
# Session 8, call P: Nsight Compute of the backward (qsa's three paths, fla's kernels), the BF16 RS
# scorers' timing stability, top-k 2K chunks / lean keep, all on main (3c68ca7 = 03063e6's cubins).
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-40}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w; mkdir -p $W/prof $W/sbs
cd $R/.h200/b/main
NCU="ncu --clock-control none --set full --import-source no -f"
Q="./.h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --suite bench --cases $R/.h200/prof-cases.yaml --case attn_prefill_16k_bwd"
TAIL=4 run timeout 120 $NCU -k regex:qsa_attn_kv_bwd --launch-count 1 -o $W/prof/attn_kv_bwd $Q --variant kv_bwd --out /tmp/r1.yaml
TAIL=4 run timeout 120 $NCU -k regex:qsa_attn_staged_bwd --launch-count 2 -o $W/prof/attn_staged_bwd $Q --variant auto --out /tmp/r2.yaml
TAIL=4 run timeout 120 $NCU -k regex:qsa_attn_kv_dq_bwd --launch-count 1 -o $W/prof/attn_kv_dq_bwd $Q --variant kvdq_bwd --out /tmp/r3.yaml
TAIL=4 run timeout 150 $NCU -k regex:parallel_nsa --launch-skip 3 --launch-count 4 -o $W/prof/fla_bwd python3 $R/.h200/fla_bwd_once.py
for f in $W/prof/*.ncu-rep; do n=$(basename $f .ncu-rep); ncu -i $f --page details > $W/prof/$n.txt 2>&1; ncu -i $f --page raw --csv > $W/prof/$n.raw.csv 2>&1; done
ls -la $W/prof
TAIL=60 run timeout 150 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --skip-check --out $W/sbs/scores-1
TAIL=60 run timeout 150 python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --quick --sweep 'c2k:QSA_TOPK_KERNEL=spec,QSA_TOPK_SPEC_CHUNK=2048' --sweep 'lean:QSA_TOPK_KERNEL=spec,QSA_TOPK_SPEC_KEEP=lean' --sweep 'c2klean:QSA_TOPK_KERNEL=spec,QSA_TOPK_SPEC_CHUNK=2048,QSA_TOPK_SPEC_KEEP=lean' --out $W/sbs/topk.md
tar -C $W -czf $OUT/p.tgz .
echo "=== done $(date -u +%T)"

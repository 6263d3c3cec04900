#!/usr/bin/env bash
# Session 11, call P: Nsight Compute (full set) of the wgmma backward form (kvwg, 114 ms in
# call A against the default's 68.8) at the prefill shape, to name what bounds it; and a repeat
# of call A's staged-q decode sweep (QSA_ATTN_DEC_QLOAD=cta), to see whether its 0.2-0.4 us hold.
set -u
C=docs/results/session11-2026-12-02/calls/prof-cases.yaml
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-6}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=$OUT/prof; mkdir -p $W /tmp/qs2
NCU="ncu --clock-control none --set full --import-source no -f"
Q="./.h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run timeout 60 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep qs --out /tmp/qs2
grep -h -E "\(auto\)\s*\||qload=cta \|" /tmp/qs2/bench.md | grep -v "L2 cold" | cut -d'|' -f2-7
cp /tmp/qs2/bench.md $W/qs-repeat.md
run timeout 240 $NCU -k regex:qsa_attn_kvwg_dq_bwd --launch-count 1 -o $W/attn_kvwg_dq_bwd $Q --suite bench --cases $C --case attn_prefill_16k_bwd --variant kvwg_bwd --out /tmp/b.yaml
for f in $W/*.ncu-rep; do n=$(basename $f .ncu-rep); ncu -i $f --page details > $W/$n.txt 2>&1; done
rm -f $W/*.ncu-rep
grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Tensor is|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Eligible Warps|Stall|L1/TEX Cache Throughput|DRAM Throughput|Registers Per" $W/attn_kvwg_dq_bwd.txt | head -40
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 15, call P (H200): Nsight Compute of the bf16 backward default on sm_90a,
# qsa_attn_kvwg2a3_dq_bwd_bf16, at the side by side's prefill shape (attn_prefill_16k: B=4,
# T=16K, 64 / 4 heads, t=16), to name what bounds it (session 11 profiled kvwg, the one-warpgroup
# form; kvwg2a3 became the default in session 14 unprofiled). The SASS page gives each
# instruction's stall samples and executed counts, summed per stall reason, opcode and window of code
# by tools/ncu_sass_regions.py (run here on the fetched CSV).
# From the repo root with .h200/qsa and build/kernels/sm_90 built from this commit.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-8}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
W=$OUT/prof; mkdir -p $W
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
NCU="ncu --clock-control none --set full --import-source no -f"
run timeout 300 $NCU -k regex:qsa_attn_kvwg2a3_dq_bwd --launch-count 1 -o $W/kvwg2a3 $Q --suite bench --case attn_prefill_16k --variant auto --out /tmp/b.yaml
ncu -i $W/kvwg2a3.ncu-rep --page details > $W/kvwg2a3-details.txt 2>&1
ncu -i $W/kvwg2a3.ncu-rep --page raw --csv > $W/kvwg2a3-raw.csv 2>&1
ncu -i $W/kvwg2a3.ncu-rep --page source --csv --print-source sass > $W/kvwg2a3-sass.csv 2>&1
rm -f $W/*.ncu-rep
ls -la $W
grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Eligible Warps|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Registers Per|Compute \(SM\)" $W/kvwg2a3-details.txt | head -30
echo "=== done $(date -u +%T)"

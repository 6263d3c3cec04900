#!/usr/bin/env bash
# Session 19, call C (H200): Nsight Compute of the two decode kernels at the shapes
# (attn_decode_16q: 16 q x 8 KV heads g16, qsa_attn_dec_fwd_bf16; attn_decode_1q: one query,
# 64 / 4 heads, the cluster kernel), warm (the 11th launch of the bench suite, as the
# side by side times them), warp-state sampling at its finest interval (the kernels run
# 7-23 us). The SASS page is summed per stall reason, opcode and window of code by
# tools/ncu_sass_regions.py, here on the fetched CSVs. Same carried build as calls A and B.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-8}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
W=$OUT/prof; mkdir -p $W
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
NCU="ncu --clock-control none --set full --import-source no --warp-sampling-interval 0 -f"
for c in attn_decode_16q attn_decode_1q; do
  run timeout 200 $NCU -k regex:qsa_attn_dec --launch-skip 10 --launch-count 1 -o $W/$c $Q --suite bench --case $c --variant auto --out /tmp/$c.yaml
  ncu -i $W/$c.ncu-rep --page details > $W/$c-details.txt 2>&1
  ncu -i $W/$c.ncu-rep --page source --csv --print-source sass > $W/$c-sass.csv 2>&1
  rm -f $W/$c.ncu-rep
  grep -E "qsa_attn|Duration|Issue Slots Busy|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|L2 Cache Throughput|DRAM Throughput|Registers Per" $W/$c-details.txt | head -14
done
ls -la $W
echo "=== done $(date -u +%T)"

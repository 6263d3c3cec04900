#!/usr/bin/env bash
# Session 9, call P: Nsight Compute (full set) of main's (97dae69) kernels that miss their goals:
# the TF32 / BF16 decode scorers (register form, two-warpgroup ring form), the default bf16
# attention backward (kv16s_dq), decode attention at 16 and 1 query x 8 KV heads.
set -u
R=$(pwd); C=docs/results/session9-2026-12-02/calls/prof-cases.yaml
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-6}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
W=$OUT/prof; mkdir -p $W
NCU="ncu --clock-control none --set full --import-source no -f"
Q="./.h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
for v in tf32_decode_wg tf32_decode_wgc2 bf16_decode_wg; do
  run timeout 90 $NCU -k regex:block_scores_.*_decode_wg --launch-count 1 -o $W/$v $Q --suite error --case scores_decode_1q_262k_wg --variant $v --out /tmp/s-$v.yaml
done
run timeout 150 $NCU -k regex:qsa_attn_kv16s_dq_bwd --launch-count 1 -o $W/attn_kv16s_dq_bwd $Q --suite bench --cases $C --case attn_prefill_16k_bwd --variant auto --out /tmp/b.yaml
run timeout 90 $NCU -k regex:qsa_attn_dec --launch-count 2 -o $W/attn_dec_16q $Q --suite bench --cases $C --case attn_dec_16q_8kv --variant auto --out /tmp/d16.yaml
run timeout 90 $NCU -k regex:qsa_attn_dec --launch-count 2 -o $W/attn_dec_1q $Q --suite bench --cases $C --case attn_dec_1q_8kv --variant auto --out /tmp/d1.yaml
for f in $W/*.ncu-rep; do n=$(basename $f .ncu-rep); ncu -i $f --page details > $W/$n.txt 2>&1; ncu -i $f --page source --csv > /dev/null 2>&1; done
rm -f $W/*.ncu-rep.tmp; ls -la $W
echo "=== done $(date -u +%T)"

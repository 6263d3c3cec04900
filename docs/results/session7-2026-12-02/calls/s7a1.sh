#!/usr/bin/env bash
# Session 7, call A1: branches topk, wgdec, wgsc2 (their H200.md steps, sanitizers left for the final call).
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-40}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/w; mkdir -p $W/topk $W/wgdec/sbs $W/wgsc2
echo "======== topk $(cat $R/.h200/b/topk/COMMIT)"; cd $R/.h200/b/topk
TAIL=6 run timeout 90 .h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --suite parity \
  --cases tools/h200-topk-spec/cases.yaml \
  --case h200_topk_spec_1q --case h200_topk_spec_3q --case h200_topk_spec_16q \
  --case h200_topk_register_few --case h200_topk_register_few_4k \
  --case topk_spec_variants --case topk_register_few --case topk_register_few_2k \
  --case topk_cluster_paths --case topk_cut_specials --case topk_split_edges --case topk_edges_small \
  --out $W/topk/topk-parity.yaml
grep 'status:' $W/topk/topk-parity.yaml | sort | uniq -c
S=QSA_TOPK_SPEC
TAIL=60 run timeout 200 python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --quick \
  --sweep "final:${S}_FINAL=window" --sweep "bound:${S}_BOUND=window" --sweep "vec4:${S}_LOAD=vec4" \
  --sweep "all3:${S}_FINAL=window,${S}_BOUND=window,${S}_LOAD=vec4" \
  --sweep "8k:${S}_CHUNK=8192" --sweep "16k:${S}_CHUNK=16384" \
  --sweep "all3-8k:${S}_CHUNK=8192,${S}_FINAL=window,${S}_BOUND=window,${S}_LOAD=vec4" \
  --sweep "all3-16k:${S}_CHUNK=16384,${S}_FINAL=window,${S}_BOUND=window,${S}_LOAD=vec4" \
  --sweep "few:QSA_TOPK_REGISTER_FEW=1" \
  --out $W/topk/topk-sweep.md
echo "======== wgdec $(cat $R/.h200/b/wgdec/COMMIT)"; cd $R/.h200/b/wgdec
TAIL=4 run timeout 60 .h200/qsa run --target sm_90 --quiet --suite error --suite parity --case scores_decode_wg \
    --case scores_decode_wg_ragged --case scores_emu_decode --case scores_ragged --out $W/wgdec/check.yaml
grep 'status:' $W/wgdec/check.yaml | sort | uniq -c
TAIL=70 run timeout 120 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/wgdec/sbs
TAIL=4 run timeout 60 .h200/qsa run --target sm_90 --quiet --suite error --suite bench --case scores_decode_1q_262k \
    --case scores_decode_1q_262k_wg --out $W/wgdec/bench.yaml
grep -E 'status:|median' $W/wgdec/bench.yaml | head -40
echo "======== wgsc2 $(cat $R/.h200/b/wgsc2/COMMIT)"; cd $R/.h200/b/wgsc2
TAIL=4 run timeout 60 .h200/qsa run --target sm_90 --quiet --suite error --suite parity --case scores_ragged_rs \
    --case scores_emu_tiles_rs --case scores_prefill_32k_rs --case scores_ragged \
    --case scores_emu_tiles --out $W/wgsc2/check.yaml
grep 'status:' $W/wgsc2/check.yaml | sort | uniq -c
TAIL=70 run timeout 120 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/wgsc2
tar -C $W -czf $OUT/a1.tgz .
echo "=== done $(date -u +%T)"

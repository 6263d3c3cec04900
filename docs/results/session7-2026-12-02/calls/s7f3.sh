#!/usr/bin/env bash
# Session 7, call F3: the merged tree with the top-k vec4 fix (39c0968; only topk code objects
# changed since F1): memcheck over the top-k paths, racecheck in three parts, the sm_90 golden
# run again (the one blessed), and the top-k side by side.
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-60}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/compute-sanitizer" ] && export PATH="$d:$PATH" && break; done
cd $R/.h200/b/merged; echo "merged: $(cat COMMIT)"; W=/tmp/w; mkdir -p $W/topk
st() { grep 'status:' $1 | sort | uniq -c | tr '\n' ' '; echo; }
TAIL=2 run timeout 60 .h200/qsa run --target sm_90 --code-objects build/kernels --quiet --sanitize memcheck --suite parity --case topk_spec_variants --case topk_register_few --case topk_register_few_2k --case topk_cluster_paths --case topk_cut_specials --case topk_split_edges --out $W/memcheck-topk/results.yaml
st $W/memcheck-topk/results.yaml
i=0; for C in "--case scores_ragged_rs --case scores_decode_wg --case scores_decode_wg_ragged --case scores_emu_decode" "--case attn_emu_g4 --case attn_decode_1q --case attn_edges_g4" "--case topk_spec_variants --case topk_register_few_2k --case topk_cluster_paths"; do
  i=$((i+1)); TAIL=2 run timeout 55 .h200/qsa run --target sm_90 --code-objects build/kernels --quiet --sanitize racecheck --suite error --suite parity $C --out $W/racecheck-$i/results.yaml
  st $W/racecheck-$i/results.yaml
done
tar -C $W -czf $OUT/san3.tgz .
TAIL=3 run timeout 150 .h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
st $W/sm_90/results.yaml
TAIL=30 run timeout 40 python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --quick --out $W/topk/topk_quick.md
tar -C $W -czf $OUT/golden3.tgz sm_90 topk
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 7, call F2: compute-sanitizer over the new kernels of the merged tree (b/merged), the
# ring forward's forced variants, then sm_86 / sm_75 through their PTX on the changed families.
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-60}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/compute-sanitizer" ] && export PATH="$d:$PATH" && break; done
echo "compute-sanitizer: $(compute-sanitizer --version | tail -1)"
cd $R/.h200/b/merged; W=/tmp/w; mkdir -p $W
st() { grep 'status:' $1 | sort | uniq -c | tr '\n' ' '; echo; }
C="--case scores_ragged_rs --case scores_emu_tiles_rs --case scores_decode_wg --case scores_decode_wg_ragged --case scores_emu_decode --case attn_emu_g4 --case attn_decode_1q --case attn_edges_g4 --case attn_decode_16q_8k --case topk_spec_variants --case topk_register_few --case topk_register_few_2k --case topk_cluster_paths"
for tool in memcheck synccheck racecheck; do
  TAIL=2 run timeout 75 .h200/qsa run --target sm_90 --code-objects build/kernels --quiet --sanitize $tool --suite error --suite parity $C --out $W/$tool/results.yaml
  st $W/$tool/results.yaml
done
sed -E -e 's/^  - \{name: kv_bwd, family: attention/  - {name: ring_qs, family: attention, env: {QSA_ATTN_KERNEL: staged, QSA_ATTN_FWD: ring, QSA_ATTN_RING_Q: shared, QSA_ATTN_RING_SLOT: half, QSA_ATTN_STAGES: "3", QSA_ATTN_RING_RESCALE: lazy, QSA_ATTN_RING_COPY: warp}, doc: "ring qs"}\n  - {name: ring_warp, family: attention, env: {QSA_ATTN_KERNEL: staged, QSA_ATTN_FWD: ring, QSA_ATTN_RING_COPY: warp, QSA_ATTN_RING_RESCALE: lazy}, doc: "ring warp copies"}\n  - {name: ring_sw, family: attention, env: {QSA_ATTN_KERNEL: staged, QSA_ATTN_FWD: ring, QSA_ATTN_RING_LAYOUT: swizzle, QSA_ATTN_RING_RESCALE: lazy}, doc: "ring swizzled"}\n&/' \
  -e '/^  - name: attn_(emu_g4|emu_g8_f16|causal_start)$/,/variants:/ s/variants: \[(.*)\]/variants: [\1, ring_qs, ring_warp, ring_sw]/' matrix.yaml > $W/ring-matrix.yaml
TAIL=2 run timeout 60 .h200/qsa run --target sm_90 --matrix $W/ring-matrix.yaml --code-objects build/kernels --quiet --suite error --case attn_emu_g4 --case attn_emu_g8_f16 --case attn_causal_start --variant ring_qs --variant ring_warp --variant ring_sw --out $W/ring-error/results.yaml
st $W/ring-error/results.yaml
for tool in racecheck synccheck memcheck; do
  TAIL=2 run timeout 45 .h200/qsa run --target sm_90 --matrix $W/ring-matrix.yaml --code-objects build/kernels --quiet --sanitize $tool --suite error --case attn_emu_g4 --variant ring_qs --variant ring_warp --variant ring_sw --out $W/ring-$tool/results.yaml
  st $W/ring-$tool/results.yaml
done
tar -C $W -czf $OUT/sanitize.tgz .
P="--case scores_ragged --case scores_emu_decode --case attn_emu_g4 --case attn_decode_16q_8k --case attn_causal_start --case topk_spec_variants --case topk_register_few"
for t in sm_86 sm_75; do
  TAIL=2 run timeout 40 .h200/qsa run --target $t --code-objects build/kernels --quiet --suite error --suite parity $P --out $W/$t/results.yaml
  st $W/$t/results.yaml
done
tar -C $W -czf $OUT/ptx.tgz sm_86 sm_75
echo "=== done $(date -u +%T)"

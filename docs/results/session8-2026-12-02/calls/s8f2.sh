#!/usr/bin/env bash
# Session 8, call F2: the merged tree's extra-case error / parity runs (attn-dec, attn-kv16,
# top-k at full size), compute-sanitizer over the new kernels, sm_86 / sm_75 through their PTX.
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-60}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do [ -x "$d/compute-sanitizer" ] && export PATH="$d:$PATH" && break; done
echo "compute-sanitizer: $(compute-sanitizer --version | tail -1)"
[ -d /tmp/b/merged ] || { mkdir -p /tmp/b; tar -C /tmp/b -xzf .h200/snaps/merged.tgz; }
cd /tmp/b/merged; W=/tmp/w2; mkdir -p $W
st() { grep 'status:' $1 | sort | uniq -c | tr '\n' ' '; echo; }
Q=".h200/qsa run --target sm_90 --code-objects build/kernels --quiet"
TAIL=2 run timeout 60 $Q --suite error --cases examples/cases/attn-dec.yaml --case attn_dec_1q --case attn_dec_16q_8k --case attn_dec_emu_g4 --case attn_dec_emu_g8_f16 --out $W/extra/attn-dec.yaml; st $W/extra/attn-dec.yaml
TAIL=2 run timeout 40 $Q --suite error --cases examples/cases/attn-kv16.yaml --case attn_kv16_g4 --case attn_kv16_g16 --case attn_kv16_g32 --case attn_kv16_g1_two_chunks --case attn_kv16_g16_f16 --case attn_kv16_causal_g16 --out $W/extra/attn-kv16.yaml; st $W/extra/attn-kv16.yaml
TAIL=2 run timeout 60 $Q --suite parity --cases tools/h200-topk-spec/cases.yaml --case h200_topk_spec_1q --case h200_topk_spec_3q --case h200_topk_spec_16q --out $W/extra/topk-full.yaml; st $W/extra/topk-full.yaml
tar -C $W -czf $OUT/extra.tgz extra
C="--case scores_decode_wg --case scores_decode_wg_ragged --case scores_ragged_rs --case attn_emu_g4 --case attn_causal_start --case attn_decode_1q --case attn_edges_g4 --case topk_spec_variants --case topk_cluster_paths"
for tool in memcheck synccheck; do
  TAIL=2 run timeout 80 $Q --sanitize $tool --suite error --suite parity $C --out $W/$tool/results.yaml; st $W/$tool/results.yaml
done
TAIL=2 run timeout 60 $Q --sanitize racecheck --suite error --suite parity --case scores_decode_wg --case scores_decode_wg_ragged --case scores_ragged_rs --out $W/racecheck-scores/results.yaml; st $W/racecheck-scores/results.yaml
TAIL=2 run timeout 60 $Q --sanitize racecheck --suite error --case attn_emu_g4 --case attn_causal_start --case attn_decode_1q --variant auto --variant warp_fwd --variant warp_fwd_x --out $W/racecheck-attn/results.yaml; st $W/racecheck-attn/results.yaml
TAIL=2 run timeout 60 $Q --sanitize racecheck --suite parity --case topk_spec_variants --out $W/racecheck-topk/results.yaml; st $W/racecheck-topk/results.yaml
for tool in racecheck memcheck; do
  TAIL=2 run timeout 50 $Q --sanitize $tool --suite error --cases examples/cases/attn-kv16.yaml --case attn_kv16_g16 --variant kv16_bwd --variant kv16s_bwd --variant kvdq16_bwd --variant kvdq16s_bwd --out $W/$tool-kv16/results.yaml; st $W/$tool-kv16/results.yaml
  TAIL=2 run timeout 40 $Q --sanitize $tool --suite error --cases examples/cases/attn-dec.yaml --case attn_dec_emu_g4 --out $W/$tool-dec/results.yaml; st $W/$tool-dec/results.yaml
done
tar -C $W -czf $OUT/sanitize.tgz --exclude extra .
P="--case scores_ragged --case scores_emu_decode --case attn_emu_g4 --case attn_decode_16q_8k --case attn_causal_start --case topk_spec_variants --case topk_register_few"
for t in sm_86 sm_75; do
  TAIL=2 run timeout 40 .h200/qsa run --target $t --code-objects build/kernels --quiet --suite error --suite parity $P --out $W/$t/results.yaml; st $W/$t/results.yaml
done
tar -C $W -czf $OUT/ptx.tgz sm_86 sm_75
echo "=== done $(date -u +%T)"

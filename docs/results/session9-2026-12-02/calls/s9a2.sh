#!/usr/bin/env bash
# Session 9, call A, command 2 (merged tree, warm): the attention side by side (fla in the same
# process, --check, head-major decode rows), the full scores side by side, sanitizers on every
# new kernel (TMA decode scorers, head-major decode, the backward's nc / ps=1 forms).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w; mkdir -p $W/attn $W/scores $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
TAIL=3 run timeout 280 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --fwd-sweep warp --decode-sweep hnd --out $W/attn
tar -C $W -czf $OUT/attn.tgz attn
for t in memcheck racecheck synccheck; do
  TAIL=3 run timeout 60 $Q --sanitize $t --suite error --case scores_decode_wg --case scores_decode_wg_ragged --variant tf32_decode_tma --variant bf16_decode_tma --variant tf32_decode_tma2 --variant bf16_decode_tma2 --out $W/san/scores-tma-$t.yaml
done
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-dec.yaml --case attn_dec_hnd_emu --case attn_dec_hnd_emu_f16 --out $W/san/hnd-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize synccheck --suite error --cases examples/cases/attn-dec.yaml --case attn_dec_hnd_emu_f16 --out $W/san/hnd-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases examples/cases/attn-dec.yaml --case attn_dec_hnd_emu --case attn_dec_hnd_emu_f16 --case attn_dec_hnd_1q --out $W/san/hnd-memcheck.yaml
TAIL=3 run timeout 80 $Q --sanitize racecheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvdq16sc_bwd --variant kvdq16sp1_bwd --out $W/san/forms-racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --variant kvdq16sc_bwd --variant kvdq16sp1_bwd --out $W/san/forms-memcheck.yaml
tar -C $W -czf $OUT/san.tgz san
TAIL=3 run timeout 100 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/scores/sbs
tar -C $W -czf $OUT/scores.tgz scores
echo "=== done $(date -u +%T)"

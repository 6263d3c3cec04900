#!/usr/bin/env bash
# Session 9, call A, command 1 (merged tree): the sm_90 golden run, then the branches' decisions:
# scoresdec (TMA decode scorer sweep + the runner on the decode cases), attnbwd (the fused
# backward's forms beside fla), attndec (error suite on the head-major cases, runner bench).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline -1 2>/dev/null || true
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w; mkdir -p $W/sm_90 $W/a1
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
TAIL=4 run timeout 300 $Q --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep 'status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -40
tar -C $W -czf $OUT/golden.tgz sm_90
TAIL=70 run timeout 100 python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --shapes 1x64x1000,1x64x262144 --out $W/a1/sbs-tma
TAIL=6 run timeout 60 $Q --suite error --suite parity --suite bench --case scores_decode_wg --case scores_decode_wg_ragged --case scores_decode_1q_262k_wg --out $W/a1/decode-tma.yaml
TAIL=30 run timeout 150 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/a1
TAIL=6 run timeout 60 $Q --suite error --cases examples/cases/attn-dec.yaml --case attn_decode_16q_hnd --case attn_decode_1q_hnd --case attn_dec_hnd_emu --case attn_dec_hnd_emu_f16 --case attn_dec_hnd_1q --out $W/a1/error_hnd.yaml
TAIL=6 run timeout 60 $Q --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16 --out $W/a1/error-forms.yaml
tar -C $W -czf $OUT/a1.tgz a1
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 10, call G, command 1: dec1q's one-level cluster merge (QSA_ATTN_DEC_MERGE=flat) beside
# auto and the chain probes (plans/dec1q.md), its error suite and sanitizers; then the golden
# run of the merged tree (every session-10 branch: dec, bwd, tidy, dec1q, and the D1 refactor).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w; mkdir -p $W/flat $W/san $W/sm_90
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
TAIL=3 run timeout 80 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep flat --out $W/flat
grep -h -E "\(auto\)|merge=flat|probe=loop \|" $W/flat/bench.md | cut -d'|' -f2-7
TAIL=4 run timeout 100 $Q --suite error --cases examples/cases/attn-dec-flat.yaml --case attn_flat_emu_g4 --case attn_flat_emu_g8_f16 --case attn_flat_hnd_emu_f16 --case attn_flat_1q --case attn_flat_16q --out $W/flat/error_flat.yaml
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-dec-flat.yaml --case attn_flat_emu_g4 --case attn_flat_emu_g8_f16 --variant dec_flat --out $W/san/flat-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize synccheck --suite error --cases examples/cases/attn-dec-flat.yaml --case attn_flat_emu_g8_f16 --variant dec_flat --out $W/san/flat-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases examples/cases/attn-dec-flat.yaml --case attn_flat_emu_g4 --case attn_flat_hnd_emu_f16 --variant dec_flat --out $W/san/flat-memcheck.yaml
tar -C $W -czf $OUT/flat.tgz flat san
TAIL=3 run timeout 330 $Q --bench-golden golden/sm_90/bench.yaml --out $W/sm_90/results.yaml
grep 'status:' $W/sm_90/results.yaml | sort | uniq -c
grep -B3 -A12 'status: fail' $W/sm_90/results.yaml | grep -E "case|variant|message" | head -30
tar -C $W -czf $OUT/golden.tgz sm_90
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 11, branch dechead (issue 13, the decode head): q staged once per CTA
# (QSA_ATTN_DEC_QLOAD=cta, the `_qs_` kernels) beside auto and the static kernel's chain probes,
# its error suite (emulator-size cases and the two issue-13 shapes) and the three sanitizers on
# its emulator-size cases. From the repo root of the branch; $OUT the output folder.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w/qs; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# 1. the sweep: auto, the static chain probes, qload=cta and its chain probes, both shapes, g16 / g8
TAIL=3 run timeout 90 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep qs --out $W
# 2. errors against FP64: auto, dec_qs, dec_qs_split
TAIL=4 run timeout 100 $Q --suite error --cases examples/cases/attn-dec-qs.yaml --case attn_qs_emu_g4 --case attn_qs_emu_g8_f16 --case attn_qs_hnd_emu_f16 --case attn_qs_16q --case attn_qs_1q --out $W/error_qs.yaml
# 3. sanitizers on the new kernels (emulator-size cases)
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-dec-qs.yaml --case attn_qs_emu_g4 --case attn_qs_emu_g8_f16 --variant dec_qs --variant dec_qs_split --out $W/san/qs-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize synccheck --suite error --cases examples/cases/attn-dec-qs.yaml --case attn_qs_emu_g8_f16 --variant dec_qs --variant dec_qs_split --out $W/san/qs-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases examples/cases/attn-dec-qs.yaml --case attn_qs_emu_g4 --case attn_qs_hnd_emu_f16 --variant dec_qs --variant dec_qs_split --out $W/san/qs-memcheck.yaml
tar -C /tmp/w -czf $OUT/qs.tgz qs
# the rows that decide (bench.md: case | group | variant | median ms ...)
grep -h -E "\(auto\)\s*\||probe=(launch|list|loop|no_math) \||qload=cta" $W/bench.md | grep -v "L2 cold" | cut -d'|' -f2-6 | head -60
echo "=== done $(date -u +%T)"

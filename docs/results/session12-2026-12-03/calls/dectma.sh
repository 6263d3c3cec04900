#!/usr/bin/env bash
# Session 12, branch dectma (issue 13, the 16-query copy floor): the decode forward with its K/V
# rows fetched by cp.async.bulk (QSA_ATTN_DEC_COPY=bulk, the `_bk_` kernels: one TMA copy per
# 256-byte row into the warp's ring stage, one mbarrier per stage) beside auto, each with its
# copy floor (probe=no_math), on both issue-13 shapes at groups 16 and 8; its error suite
# (emulator-size cases and the four issue-13 shapes) and the three sanitizers on its
# emulator-size cases. Needs the branch's release runner in .h200/qsa and its sm_90 code objects
# in build/kernels/sm_90 (H200.md). From the repo root of the branch; $OUT the output folder.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w/bk; mkdir -p $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
C="--cases examples/cases/attn-dec-bulk.yaml"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# 1. the sweep: auto and its chain probes, bulk and its probes, deeper rings (both copy forms'
#    copy floors), both shapes, g16 / g8, and the head-major twin
TAIL=3 run timeout 150 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep bulk --out $W
# 2. errors against FP64: auto, dec_bulk (and _split / _deep on the emulator-size cases)
TAIL=4 run timeout 150 $Q --suite error $C --case attn_bk_emu_g4 --case attn_bk_emu_g8_f16 --case attn_bk_emu_g16 --case attn_bk_hnd_emu_f16 --case attn_bk_16q --case attn_bk_16q_g8 --case attn_bk_1q --case attn_bk_1q_g8 --out $W/error_bk.yaml
# 3. sanitizers on the new kernels (emulator-size cases; the cluster kernel is dec_bulk's plan there)
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $C --case attn_bk_emu_g4 --case attn_bk_emu_g16 --variant dec_bulk --variant dec_bulk_split --variant dec_bulk_deep --out $W/san/bk-racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $C --case attn_bk_emu_g8_f16 --variant dec_bulk --variant dec_bulk_split --variant dec_bulk_deep --out $W/san/bk-synccheck.yaml
TAIL=3 run timeout 90 $Q --sanitize memcheck --suite error $C --case attn_bk_emu_g4 --case attn_bk_hnd_emu_f16 --variant dec_bulk --variant dec_bulk_split --variant dec_bulk_deep --out $W/san/bk-memcheck.yaml
tar -C /tmp/w -czf $OUT/bk.tgz bk
# the rows that decide (bench.md: case | group | variant | median ms ...)
grep -h -E "\(auto\)\s*\||probe=(list|loop|no_math) \||copy=bulk|stages=(3|4) probe=no_math" $W/bench.md | grep -v "L2 cold" | cut -d'|' -f2-6 | head -70
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 12, branch dec1q (issue 13, the one-query decode's merge): the lean two-level merge
# (QSA_ATTN_DEC_MERGE=lean, the `_lean_` kernels) beside auto with the chain probes and the new
# merge probes (cta, cluster), twice (the 1 q figures moved 0.2-0.4 us run to run in session 11);
# its error suite (emulator-size cases and the issue-13 one-query shapes, both groups) and the
# three sanitizers on its emulator-size cases. From the repo root of the branch; $OUT the output
# folder. About 80 s of GPU time (session 11's matching steps: sweep 8 s, error suite with two
# 262K cases 44 s, sanitizers 10 s).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w/lean; mkdir -p $W/a $W/b $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
L=examples/cases/attn-dec-lean.yaml
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# 1. the sweep, twice: auto, the chain probes (launch, list, loop, no_math), the merge probes
#    (cta, cluster) on auto's pull merge, lean and its probes, lean with q per CTA, lean on
#    4 warps x 2 units, push and auto's q per CTA as controls; the head-major twin's auto / lean.
TAIL=3 run timeout 90 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep lean --out $W/a
TAIL=3 run timeout 90 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep lean --out $W/b
# 2. errors against FP64: auto, dec_lean, dec_lean_qs (emulator-size cases, one query at group 16 and 8)
TAIL=4 run timeout 100 $Q --suite error --cases $L --case attn_lean_emu_g4 --case attn_lean_emu_g8_f16 --case attn_lean_hnd_emu_f16 --case attn_lean_1q --case attn_lean_1q_g8 --out $W/error_lean.yaml
grep -E "status: (fail|crashed)" -B8 $W/error_lean.yaml | grep -E "case:|variant:|check:|message:" | head -20
# 3. sanitizers on the new kernels (emulator-size cases)
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases $L --case attn_lean_emu_g4 --case attn_lean_emu_g8_f16 --variant dec_lean --variant dec_lean_qs --out $W/san/lean-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize synccheck --suite error --cases $L --case attn_lean_emu_g8_f16 --variant dec_lean --variant dec_lean_qs --out $W/san/lean-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases $L --case attn_lean_emu_g4 --case attn_lean_hnd_emu_f16 --variant dec_lean --variant dec_lean_qs --out $W/san/lean-memcheck.yaml
tar -C /tmp/w -czf $OUT/lean.tgz lean
# the rows that decide (bench.md: case | group | variant | median ms ...), both runs
for r in a b; do
  echo "=== run $r"
  grep -h -E "\(auto\)\s*\||probe=(launch|list|loop|no_math|cta|cluster) \||merge=(lean|push)|qload=cta" $W/$r/bench.md | grep -v "L2 cold" | grep "1 q" | cut -d'|' -f2-6 | head -60
done
echo "=== done $(date -u +%T)"

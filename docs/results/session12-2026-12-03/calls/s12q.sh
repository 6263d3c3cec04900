#!/usr/bin/env bash
# Session 12, call Q: the third run of the staged-q decode sweep (session 11's rule, plans/dechead.md
# there: flip DEFAULT_Q_CTA when qload=cta is >= 0.5 us faster at both 16 q groups, or >= 0.3 us
# at both 1 q groups; call A met neither half, call P met the 1 q half; this run decides), on
# main at cb40ea3. From the repo root; $OUT the output folder.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w/q; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
TAIL=3 run timeout 120 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep qs --out $W
tar -C /tmp/w -czf $OUT/q.tgz q
grep -h -E "\(auto\)\s*\||probe=(launch|list|loop|no_math) \||qload=cta" $W/bench.md | grep -v "L2 cold" | cut -d'|' -f2-6 | head -60
echo "=== done $(date -u +%T)"

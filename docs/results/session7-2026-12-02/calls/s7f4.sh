#!/usr/bin/env bash
# Session 7, call F4: the decode attention's copy layout restored to the one measured in call A2
# (rest of the merged tree as in F3): the runner's error suite on the decode cases, then the
# decode side by side.
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-60}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
cd $R/.h200/b/merged; W=/tmp/w; mkdir -p $W/attn
TAIL=2 run timeout 40 .h200/qsa run --target sm_90 --code-objects build/kernels --quiet --suite error --case attn_decode_16q_8k --case attn_decode_1q --case attn_decode_16q --case attn_edges_g4 --case attn_edges_g8_f16 --case attn_emu_g4 --out $W/error/results.yaml
grep 'status:' $W/error/results.yaml | sort | uniq -c | tr '\n' ' '; echo
TAIL=4 run timeout 60 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --out $W/attn
grep -E "\(auto\)" $W/attn/bench.md | cut -c1-140
tar -C $W -czf $OUT/f4.tgz .

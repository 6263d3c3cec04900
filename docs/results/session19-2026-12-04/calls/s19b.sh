#!/usr/bin/env bash
# Session 19, call B (H200): the decode's whole configuration sweep (`--decode-sweep all`: warps x
# stages, splits x merge, cluster, pair, warps x splits, session 8's forms and the probes) once,
# beside call A's read floor, and the floor again (is it steady across calls?).
# Same carried build as call A.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
W=/tmp/s19b; mkdir -p $W/floor $W/side
TAIL=5 run timeout 150 python3 bench/hbm_floor.py --qsa .h200/qsa --kernels build/kernels/sm_90 --reader build/bench --out $W/floor
tar -C $W -czf $OUT/s19b.tgz .
TAIL=5 run timeout 400 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep all --out $W/side
tar -C $W -czf $OUT/s19b.tgz .
echo "=== done $(date -u +%T)"

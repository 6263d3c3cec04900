#!/usr/bin/env bash
# Session 10, call G, command 2: sm_86 and sm_75 code as PTX compiled by the H200's driver at
# load (status `run (PTX on sm_90)`: no bench medians), for the comparison with their goldens
# under the one-decade rule across makers (xtask/src/golden/makers.rs).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
W=/tmp/w; mkdir -p $W/ptx/sm_86 $W/ptx/sm_75
for t in sm_86 sm_75; do
  TAIL=3 run timeout 270 .h200/qsa run --target $t --matrix matrix.yaml --code-objects build/kernels --quiet --out $W/ptx/$t/results.yaml
  grep '^  status:' $W/ptx/$t/results.yaml | sort | uniq -c
done
tar -C $W -czf $OUT/ptx.tgz ptx
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 7, call A2: branches attnfwd, attndec (bench --check), fla's kernels under ncu, raw stall metrics of call P's profiles.
set -u
R=$(pwd)
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-40}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w; mkdir -p $W/attnfwd $W/attndec $W/prof
echo "======== attnfwd $(cat $R/.h200/b/attnfwd/COMMIT)"; cd $R/.h200/b/attnfwd
TAIL=70 run timeout 200 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --prefill-only --out $W/attnfwd
echo "======== attndec $(cat $R/.h200/b/attndec/COMMIT)"; cd $R/.h200/b/attndec
TAIL=90 run timeout 200 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --check --bench --decode-only --out $W/attndec
echo "======== profiles"; cd $R/.h200/b/main
TAIL=3 run timeout 60 ncu --clock-control none --set full --import-source no -k regex:parallel_nsa --launch-skip 1 --launch-count 5 -f -o $W/prof/fla python3 fla_once.py
ncu -i $W/prof/fla.ncu-rep --page details > $W/prof/fla.txt 2>&1
mkdir -p /tmp/reps && tar -C /tmp/reps -xzf $R/.h200/reps.tgz
for f in /tmp/reps/p/*.ncu-rep $W/prof/fla.ncu-rep; do ncu -i $f --page raw --csv > $W/prof/$(basename $f .ncu-rep).raw.csv 2>&1; done
ls $W/prof
tar -C $W -czf $OUT/a2.tgz .
echo "=== done $(date -u +%T)"

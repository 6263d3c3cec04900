#!/usr/bin/env bash
# Session 21, call C (H200): call B's sanitizers on the prefill forward's default, the warp
# forward (variant warp_fwd: at the edge cases' sizes `auto` dispatches the decode kernels, so
# call B did not reach it), on matrix.yaml's attention edge cases. Carried as call A.
set -u
export PATH=/usr/local/cuda/bin:$PATH
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --suite error"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/c; mkdir -p $W
M="--case attn_edges_g4 --case attn_edges_g8_f16 --case attn_edges_g16 --case attn_causal_start --case attn_causal_g16_f16 --variant warp_fwd"
for tool in memcheck racecheck synccheck; do
  t0=$(date +%s)
  timeout 170 $Q --sanitize $tool $M --out $W/$tool.yaml > $W/$tool.out 2>&1
  echo "### $tool rc=$? $(( $(date +%s) - t0 )) s"
done
rm -f $W/*.journal.yaml
python3 - <<'PY'
import yaml, collections, glob
for f in sorted(glob.glob("/tmp/c/*.yaml")):
    d = yaml.safe_load(open(f))
    print(f.split("/")[-1], dict(collections.Counter((r["check"], r["dispatched"], r["status"]) for r in d["records"])))
PY
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" $W/*.log | sort | uniq -c
tar -C $W -czf $OUT/s21c.tgz .
echo "=== done $(date -u +%T)"

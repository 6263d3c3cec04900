#!/usr/bin/env bash
# Session 21, call D (H200): an experiment for the 16-query decode's merge. build/lean16/sm_90
# is selection_attention.cu built by hand with -DQSA_DEC_LEAN_CTA_EXPERIMENT (the build's own
# flags: nvcc -cubin -arch=sm_90a -O3 -Ikernels -Werror all-warnings; qsa_attn_dec_fwd_bf16 166
# registers as shipped): the one-split decode kernels merge their warps as the lean merge's CTA
# level does (each warp's partial over its own ring as its loop ends, ONE CTA barrier, every
# thread forming its weights from the eight (m, l) itself), where the shipped pull merge takes
# three barriers. Same plans, same launch (`qsa plan`).
#  1. FP64 errors of the experiment build (auto: the 16-query kernel and its emulator-size cases),
#     and racecheck on the small cases;
#  2. the decode side by side, shipped (A) and experiment (B), interleaved A B A B.
set -u
export PATH=/usr/local/cuda/bin:$PATH
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/lean16 --quiet --suite error --variant auto"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
W=/tmp/d; mkdir -p $W
C="--case attn_decode_16q --case attn_decode_16q_hnd --case attn_edges_g4 --case attn_edges_g8_f16 --case attn_edges_g16 --case attn_causal_start --case attn_causal_g16_f16"
timeout 150 $Q $C --out $W/error.yaml > $W/error.out 2>&1; echo "### error rc=$?"
timeout 150 $Q --sanitize racecheck --case attn_edges_g4 --case attn_edges_g16 --case attn_causal_g16_f16 --out $W/racecheck.yaml > $W/racecheck.out 2>&1; echo "### racecheck rc=$?"
rm -f $W/*.journal.yaml
python3 - <<'PY'
import yaml, collections, glob
for f in sorted(glob.glob("/tmp/d/*.yaml")):
    d = yaml.safe_load(open(f))
    print(f.split("/")[-1], dict(collections.Counter((r["check"], r["dispatched"], r["status"]) for r in d["records"])))
PY
grep -h "RACECHECK SUMMARY" $W/*.log
for r in A1 B1 A2 B2; do
  case $r in A*) K=build/kernels/sm_90;; B*) K=build/lean16/sm_90;; esac
  mkdir -p $W/side/$r
  timeout 120 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels $K --bench --decode-only --decode-sweep lean --out $W/side/$r > $W/side/$r.out 2>&1
  echo "### side $r rc=$?"
  grep -E "\| (qsa decode(_cluster)? fwd \(auto\)|qsa decode fwd probe=loop) \|" $W/side/$r/bench.md | cut -d'|' -f2-6
done
tar -C $W -czf $OUT/s21d.tgz .
echo "=== done $(date -u +%T)"

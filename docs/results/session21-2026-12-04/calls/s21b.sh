#!/usr/bin/env bash
# Session 21, call B (H200): the submitted kernels under compute-sanitizer at issue 13's close,
# through the runner's sanitizer option (memcheck, racecheck, synccheck), the dispatch's defaults:
#  1. `auto` on matrix.yaml's attention cases: the edge cases (groups 4 / 8 / 16, causal starts,
#     partial last blocks, repeated and -1 ids, bf16 and f16: the warp forward and the sm_90
#     backward dispatch) and the four decode shapes (the decode kernel and its cluster form);
#  2. `kvwg2a3_bwd`, the prefill backward's default form, on the forms cases at emulator size,
#     with dO f32 and bf16 (kvwg2ab).
# Carried as call A: build/kernels/sm_90, .h200/qsa.
set -u
export PATH=/usr/local/cuda/bin:$PATH
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet --suite error"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/b
M="--case attn_edges_g4 --case attn_edges_g8_f16 --case attn_edges_g16 --case attn_causal_start --case attn_causal_g16_f16 --case attn_decode_16q --case attn_decode_1q --case attn_decode_16q_hnd --case attn_decode_1q_hnd --variant auto"
F="--cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --case attn_kvf_g16 --case attn_kvf_bf16do --case attn_kvf_g1_bf16do --variant kvwg2a3_bwd"
for tool in memcheck racecheck synccheck; do
  for set in M F; do
    t0=$(date +%s)
    timeout 170 $Q --sanitize $tool ${!set} --out $OUT/b/$tool-$set.yaml > $OUT/b/$tool-$set.out 2>&1
    echo "### $tool $set rc=$? $(( $(date +%s) - t0 )) s"
  done
done
python3 - <<'PY'
import yaml, collections, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/b/*.yaml")):
    if f.endswith("journal.yaml"): continue
    d = yaml.safe_load(open(f))
    print(os.path.basename(f), dict(collections.Counter((r["variant"], r["status"]) for r in d["records"])))
PY
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY|========= [0-9]+ (errors|hazards)" $OUT/b/*.log target/qsa/sanitize-*/sm_90/*.log 2>/dev/null | sort | uniq -c | head -20
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 20, call E (H200): the submission's build (a287ff7: the chain merge taken out, a comment
# changed since call D; sm_90 resources identical to golden) run again: FP64 errors of the dims
# split cases and of matrix.yaml's decode cases, racecheck on the dims split, the side by side.
set -u
export PATH=/usr/local/cuda/bin:$PATH
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p $OUT/e/side
timeout 200 $Q --suite error --cases examples/cases/attn-dec-hd.yaml --case attn_hd_emu_g4 --case attn_hd_emu_g8_f16 --case attn_hd_emu_g16 --case attn_hd_hnd_emu_f16 --case attn_hd_16q --case attn_hd_16q_g8 --case attn_hd_1q --case attn_hd_1q_g8 --out $OUT/e/error_hd.yaml 2>&1 | tail -2
timeout 200 $Q --suite error --case attn_decode_16q --case attn_decode_1q --case attn_decode_16q_hnd --case attn_decode_1q_hnd --case attn_emu_g4 --case attn_emu_g8_f16 --out $OUT/e/error_matrix.yaml 2>&1 | tail -2
timeout 120 $Q --sanitize racecheck --suite error --cases examples/cases/attn-dec-hd.yaml --case attn_hd_emu_g4 --case attn_hd_emu_g16 --out $OUT/e/racecheck.yaml 2>&1 | tail -1
grep -h SUMMARY $OUT/e/*.log 2>/dev/null
timeout 150 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep hd --out $OUT/e/side > /dev/null 2>&1; echo "side rc=$?"
grep -h -E "\(auto\) \||dims=half \|" $OUT/e/side/bench.md | cut -d'|' -f2-5
python3 - <<'PY'
import yaml, collections, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/e/*.yaml")):
    if f.endswith("journal.yaml"): continue
    d = yaml.safe_load(open(f))
    print(os.path.basename(f), dict(collections.Counter((r["variant"], r["status"]) for r in d["records"])))
PY

#!/usr/bin/env bash
# Session 20, call A (H200): issue 13's decode with O's head dimension split over warp pairs
# (QSA_ATTN_DEC_DIMS=half, the `_hd_` kernels) beside auto.
#  1. Errors against FP64 (examples/cases/attn-dec-hd.yaml): the four issue-13 shapes and the
#     emulator-size cases (partial block, -1 / repeated ids, causal edges, f16, head-major).
#  2. The side by side twice (`--decode-sweep hd`: auto and its chain probes, dims=half with
#     its probes, rings, prefetch; torch gather+sdpa in the same run).
#  3. The three sanitizers on the emulator-size cases, every dec_hd variant.
# Carried: build/kernels/sm_90 and .h200/qsa (this commit's build, nvcc 13.0.88 here).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
W=/tmp/s20a; mkdir -p $W/san $W/side/a $W/side/b
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
C="--cases examples/cases/attn-dec-hd.yaml"
TAIL=4 run timeout 150 $Q --suite error $C --case attn_hd_emu_g4 --case attn_hd_emu_g8_f16 --case attn_hd_emu_g16 --case attn_hd_hnd_emu_f16 --case attn_hd_16q --case attn_hd_16q_g8 --case attn_hd_1q --case attn_hd_1q_g8 --out $W/error_hd.yaml
tar -C /tmp -czf $OUT/s20a.tgz s20a
for r in a b; do
  TAIL=3 run timeout 150 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep hd --out $W/side/$r
  tar -C /tmp -czf $OUT/s20a.tgz s20a
done
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $C --case attn_hd_emu_g4 --case attn_hd_emu_g16 --variant dec_hd --variant dec_hd_split --variant dec_hd_deep --out $W/san/hd-racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $C --case attn_hd_emu_g8_f16 --variant dec_hd --variant dec_hd_split --variant dec_hd_deep --out $W/san/hd-synccheck.yaml
TAIL=3 run timeout 90 $Q --sanitize memcheck --suite error $C --case attn_hd_emu_g4 --case attn_hd_hnd_emu_f16 --variant dec_hd --variant dec_hd_split --variant dec_hd_deep --out $W/san/hd-memcheck.yaml
tar -C /tmp -czf $OUT/s20a.tgz s20a
# the rows that decide (bench.md: case | group | variant | median ...)
for r in a b; do echo "--- run $r"; grep -h -E "\(auto\)\s*\||probe=|dims=half|gather \|" $W/side/$r/bench.md | grep -v "L2 cold" | cut -d'|' -f2-6 | head -80; done
python3 - <<'PY'
import yaml, collections
for f in ["/tmp/s20a/error_hd.yaml"] + [f"/tmp/s20a/san/hd-{s}.yaml" for s in ("racecheck", "synccheck", "memcheck")]:
    try:
        d = yaml.safe_load(open(f))
    except Exception as e:
        print(f, "unreadable:", e); continue
    c = collections.Counter((r.get("variant"), r.get("status")) for r in d.get("records", []))
    print(f, dict(c))
    for r in d.get("records", []):
        if r.get("status") not in ("pass", "unsupported"):
            print("  ", r.get("case"), r.get("dist"), r.get("variant"), r.get("check"), r.get("status"), (r.get("message") or "")[:300])
PY
echo "=== done $(date -u +%T)"

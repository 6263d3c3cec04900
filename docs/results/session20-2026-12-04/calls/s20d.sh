#!/usr/bin/env bash
# Session 20, call D (H200): the chain merge (QSA_ATTN_DEC_CTAMERGE=chain, the `_ch_` kernels:
# each warp folds its partial into the CTA's as its loop ends, in ticket order) beside auto.
#  1. Errors against FP64 (examples/cases/attn-dec-chain.yaml): the two 16-query issue-13 shapes
#     and the emulator-size cases.
#  2. The side by side twice (`--decode-sweep chain`), torch gather+sdpa in the same run.
#  3. The three sanitizers on the emulator-size cases, both dec_chain variants.
#  4. The timeline (tools/h200-decode-trace) of auto and of the chain merge.
# Ran at commit 1469cd5; the chain merge was then taken out (slower, and racecheck reports hazards
# between its folds): ../chain-merge.patch is that commit, to re-apply for a rerun.
# Carried: build/kernels/sm_90 and .h200/qsa (this commit's build), build/trace (the same source
# with -DQSA_DEC_TRACE; nvcc 13.0.88 here).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
W=/tmp/s20d; mkdir -p $W/san $W/side/a $W/side/b $W/trace
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
C="--cases examples/cases/attn-dec-chain.yaml"
TAIL=4 run timeout 150 $Q --suite error $C --case attn_ch_emu_g4 --case attn_ch_emu_g8_f16 --case attn_ch_emu_g16 --case attn_ch_hnd_emu_f16 --case attn_ch_16q --case attn_ch_16q_g8 --out $W/error_ch.yaml
for r in a b; do
  TAIL=3 run timeout 150 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep chain --out $W/side/$r
  tar -C /tmp -czf $OUT/s20d.tgz s20d
done
TAIL=3 run timeout 90 $Q --sanitize racecheck --suite error $C --case attn_ch_emu_g4 --case attn_ch_emu_g16 --variant dec_chain --variant dec_chain_3w --out $W/san/ch-racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $C --case attn_ch_emu_g8_f16 --case attn_ch_emu_g16 --variant dec_chain --variant dec_chain_3w --out $W/san/ch-synccheck.yaml
TAIL=3 run timeout 90 $Q --sanitize memcheck --suite error $C --case attn_ch_emu_g4 --case attn_ch_hnd_emu_f16 --variant dec_chain --variant dec_chain_3w --out $W/san/ch-memcheck.yaml
T="python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace"
TAIL=60 run timeout 120 $T > $W/trace/auto.md
TAIL=60 run timeout 120 $T --switch QSA_ATTN_DEC_CTAMERGE=chain > $W/trace/chain.md
tar -C /tmp -czf $OUT/s20d.tgz s20d
for r in a b; do echo "--- run $r"; grep -h -E "\(auto\)\s*\||probe=|ctamerge=|warps=4" $W/side/$r/bench.md | grep -v "L2 cold" | grep "16 q" | cut -d'|' -f3-6; done
python3 - <<'PY'
import yaml, collections
for f in ["/tmp/s20d/error_ch.yaml"] + [f"/tmp/s20d/san/ch-{s}.yaml" for s in ("racecheck", "synccheck", "memcheck")]:
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
for s in /tmp/s20d/san/*.log; do echo "$s: $(grep -h 'SUMMARY' $s | tail -1)"; done
grep -h -A14 "16 q x 8 kv heads, 262K g16" $W/trace/*.md
echo "=== done $(date -u +%T)"

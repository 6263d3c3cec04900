#!/usr/bin/env bash
# Session 10, call S: every new form of this session beside its default and its peer (one
# command each, from the branches' plans in ../plans/), the runner's error suites and the
# sanitizers on the new kernels (dec: the dynamic unit order; bwd: dP from two dO parts).
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/w; mkdir -p $W/dec $W/bwd $W/san
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# dec (plans/dec.md): the dynamic unit order
TAIL=4 run timeout 60 $Q --suite error --cases examples/cases/attn-dec-dyn.yaml --case attn_dyn_16q --case attn_dyn_1q --case attn_dyn_emu_g4 --case attn_dyn_emu_g8_f16 --case attn_dyn_hnd_emu_f16 --out $W/dec/error_dyn.yaml
TAIL=3 run timeout 150 python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 --bench --decode-only --decode-sweep dyn --out $W/dec
# bwd (plans/bwd.md): dP from two dO parts
TAIL=30 run timeout 200 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W/bwd
TAIL=4 run timeout 60 $Q --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16 --variant auto --variant kvdq16sp2_bwd --out $W/bwd/error-dp2.yaml
tar -C $W -czf $OUT/forms.tgz dec bwd
grep -h -E "order=dynamic|\(auto\)|probe=loop \||merge=" $W/dec/bench.md | cut -d'|' -f2-6 | head -40
# sanitizers on the new kernels
TAIL=3 run timeout 60 $Q --sanitize racecheck --suite error --cases examples/cases/attn-dec-dyn.yaml --case attn_dyn_emu_g4 --case attn_dyn_emu_g8_f16 --out $W/san/dyn-racecheck.yaml
TAIL=3 run timeout 40 $Q --sanitize synccheck --suite error --cases examples/cases/attn-dec-dyn.yaml --case attn_dyn_emu_g8_f16 --out $W/san/dyn-synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases examples/cases/attn-dec-dyn.yaml --case attn_dyn_emu_g4 --case attn_dyn_hnd_emu_f16 --out $W/san/dyn-memcheck.yaml
TAIL=3 run timeout 80 $Q --sanitize racecheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --variant kvdq16sp2_bwd --out $W/san/dp2-racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error --cases examples/cases/attn-kv16-forms.yaml --case attn_kvf_g4 --variant kvdq16sp2_bwd --out $W/san/dp2-memcheck.yaml
tar -C $W -czf $OUT/san.tgz san
echo "=== done $(date -u +%T)"

#!/usr/bin/env bash
# Session 15, call A (H200): wg2a / wg2a3 with the row tables (kwg_fill_rows: each tile's global
# rows computed once by 64 threads, a tile ahead, instead of kwg_row per 16-byte copy; call P's
# profile put the copy loop at 38% of kvwg2a3's executed instructions). Sanitizers, the forms
# cases' error suite, the T=16K error case, the row-count sweep (does the shape rule's line
# move?), the prefill bench beside kv16s and fla, and the SASS profile again (instructions per
# region, to compare with call P). From the repo root with .h200/qsa and build/kernels/sm_90
# built from this commit; $OUT the output folder.
set -u
run() { echo "### $(date -u +%T) $*"; local t0=$(date +%s); "$@" 2>&1 | tail -${TAIL:-12}; echo "### rc=${PIPESTATUS[0]} $(( $(date +%s) - t0 )) s"; }
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
python3 -m zipfile -e .h200/wheels/fla_core-0.6.0-py3-none-any.whl /tmp/fla; export PYTHONPATH=/tmp/fla
W=/tmp/s15a; mkdir -p $W/san $W/prof
Q=".h200/qsa run --target sm_90 --matrix matrix.yaml --code-objects build/kernels --quiet"
F="--cases examples/cases/attn-kv16-forms.yaml"
V="--variant kvwg2a3_bwd"
C="--case attn_kvf_g4 --case attn_kvf_g8 --case attn_kvf_g16 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks --case attn_kvf_g16_f16 --case attn_kvf_causal_g16"
TAIL=4 run timeout 90 $Q --sanitize racecheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks --case attn_kvf_g4 --case attn_kvf_causal_g16 $V --variant kvwg2a_bwd --out $W/san/racecheck.yaml
TAIL=3 run timeout 60 $Q --sanitize synccheck --suite error $F --case attn_kvf_g16 --case attn_kvf_g1_two_chunks $V --out $W/san/synccheck.yaml
TAIL=3 run timeout 60 $Q --sanitize memcheck --suite error $F --case attn_kvf_g4 --case attn_kvf_g32 --case attn_kvf_g1_two_chunks $V --out $W/san/memcheck.yaml
TAIL=4 run timeout 90 $Q --suite error $F $C --variant auto --variant kvwg2a_bwd $V --out $W/error-forms.yaml
grep '^  status:' $W/error-forms.yaml | sort | uniq -c
grep -E "status: (fail|crashed)" -B8 $W/error-forms.yaml | grep -E "case:|variant:|check:|message:" | head -20
bwd_errors() { awk '/^- suite:/{if(c=="bwd")print v, st, q, k, w; v=c=st=q=k=w=""} /^  variant:/{v=$2} /^  check:/{c=$2} /^  status:/{st=$2} /^    dq_rel_max:/{q="dq="$2} /^    dk_rel_max:/{k="dk="$2} /^    dv_rel_max:/{w="dv="$2} END{if(c=="bwd")print v, st, q, k, w}' "$1"; }
TAIL=4 run timeout 200 $Q --suite error $F --case attn_kvf_prefill_16k --variant auto $V --out $W/e16k.yaml
bwd_errors $W/e16k.yaml
TAIL=4 run timeout 200 $Q --suite bench $F --case attn_kvf_rows_16 --case attn_kvf_rows_128 --case attn_kvf_rows_1024 --case attn_kvf_rows_8192 --out $W/rows.yaml
awk '/^- suite:/{if(c=="bwd")print cs, v, m; cs=v=c=m=""} /^  case:/{cs=$2} /^  variant:/{v=$2} /^  check:/{c=$2} /^    median_us:/{m=$2} END{if(c=="bwd")print cs, v, m}' $W/rows.yaml
TAIL=12 run timeout 240 python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $W --forms default,kv16s,wg2a
NCU="ncu --clock-control none --set full --import-source no -f"
TAIL=3 run timeout 200 $NCU -k regex:qsa_attn_kvwg2a3_dq_bwd --launch-count 1 -o $W/prof/kvwg2a3 $Q --suite bench --case attn_prefill_16k --variant auto --out /tmp/b.yaml
ncu -i $W/prof/kvwg2a3.ncu-rep --page details > $W/prof/kvwg2a3-details.txt 2>&1
ncu -i $W/prof/kvwg2a3.ncu-rep --page source --csv --print-source sass > $W/prof/kvwg2a3-sass.csv 2>&1
rm -f $W/prof/*.ncu-rep
grep -E "Duration|Issue Slots Busy|Executed Ipc Active|Warp Cycles Per Issued|Eligible Warps|Registers Per" $W/prof/kvwg2a3-details.txt | head -12
tar -C $W -czf $OUT/s15a.tgz .
echo "=== done $(date -u +%T)"

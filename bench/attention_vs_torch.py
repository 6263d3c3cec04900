#!/usr/bin/env python3
"""NSA selection attention on one CUDA GPU: correctness against a float64 reference, then a
side-by-side benchmark of qsa's kernels, torch (gather + scaled_dot_product_attention) and
fla's parallel_nsa (when fla-core imports), on the same inputs in one run.

No Rust is needed, only the `qsa` binary of the same checkout: every launch (kernel, grid,
block, shared bytes, splits, workspaces, arguments) is a plan of `qsa plan --json`, the code
the Rust runner launches with (bench/qsa_plan.py); the kernels are loaded from the target's
selection_attention.cubin with cupy. Variants are matrix.yaml's (auto: the decode kernel on
sm_80+ decode shapes, the warp forward on sm_90's prefill, the ring on other sm_80+ prefill,
else staged; gather); the staged kernel's staging depth and split sweeps set
QSA_ATTN_KERNEL=staged with QSA_ATTN_NBUF and QSA_ATTN_SPLITS, the ring forward's
QSA_ATTN_FWD / QSA_ATTN_STAGES / QSA_ATTN_RING_SLOT / QSA_ATTN_RING_PARTS, the warp
forward's QSA_ATTN_FWD=warp with QSA_ATTN_WARP_WARPS / _KEYS / _STAGES / _PARTS / _RESCALE
(`--fwd-sweep warp`: the prefill forward's sweep is the warp forward's and the ring's default),
the decode kernel's QSA_ATTN_DEC_WARPS / _STAGES / _SPLITS / _MERGE / _QLOAD /
_PAIR, and its ablations QSA_ATTN_DEC_PROBE=launch|no_kv|no_math (`probe=` rows: the launch
alone, no K/V copies, no math; their output is not the attention and is not checked). The
decode shapes end with the decode kernel against the staged kernel at 32-256 query tokens (the
dispatch's items-per-SM rule). --decode-only skips the prefill case and the staged sweep;
--prefill-only skips the decode cases.

    python3 bench/attention_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 \
        [--check] [--bench] [--decode-only | --prefill-only] [--fwd-sweep all|warp] [--out DIR]
    python3 bench/attention_vs_torch.py --qsa target/debug/qsa --plan-only   # no GPU: the launches, as JSON

Writes check.md / bench.md (Markdown tables with date and device) under --out.
"""

# The command line only; the work is in its modules (each imports what it needs):
#   attention_plans.py    shapes, cases, variants and sweeps, as plans of `qsa plan --json`
#   attention_problem.py  the problem's inputs on the GPU and its float64 reference
#   attention_peers.py    torch (gather + sdpa) and fla's parallel_nsa
#   attention_timing.py   CUDA-event and CUDA-graph timings
#   attention_tables.py   the --check and --bench tables (check.md, bench.md)
import argparse
import datetime
import os
import sys

import attention_plans
import qsa_plan
from attention_plans import DECODE, Qsa, bench_shape, planned


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="build/kernels/sm_90",
                    help="folder of the target's code objects (selection_attention.cubin), default %(default)s")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--prefill-only", action="store_true",
                    help="--bench runs the prefill case only (no decode cases or sweeps)")
    ap.add_argument("--decode-only", action="store_true",
                    help="bench: the decode shapes only, without the staged kernel's sweep (a short run)")
    ap.add_argument("--fwd-sweep", choices=("all", "warp"), default="all",
                    help="the prefill forward's sweep rows: all (the warp forward's, the staged kernel's and "
                         "the ring's) or warp (the warp forward's only, SWEEP_WARP)")
    ap.add_argument("--decode-sweep", choices=("all", "new", "hnd", "dyn", "flat", "qs", "lean", "bulk", "hd"),
                    default="all",
                    help="the decode kernel's variant rows: every sweep (all), only the probes and session "
                         "8's variants (new: DEC_NEW, DEC_PROBES), or the head-major rows next to the NHD "
                         "probes (hnd: DEC_HND, DEC_PROBES; no items-per-SM rows), or session 10's dynamic unit order "
                         "(dyn: DEC_CHAIN, DEC_DYN, then DEC_HND_DYN; no items-per-SM rows), or the one-level cluster "
                         "merge (flat: DEC_CHAIN, DEC_FLAT, then DEC_HND_FLAT), or q staged per CTA (qs: DEC_CHAIN, "
                         "DEC_QS, then DEC_HND_QS), or session 12's lean merge with the merge probes (lean: DEC_CHAIN, "
                         "DEC_LEAN, then DEC_HND_LEAN), or K/V rows by cp.async.bulk (bulk: DEC_CHAIN, DEC_BULK, then "
                         "DEC_HND_BULK), or O's dims split over warp pairs (hd: DEC_CHAIN, DEC_HD, then DEC_HND_HD). "
                         "The other modes end "
                         "each decode shape with DEC_HND")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    qsa_plan.add_plan_args(ap)
    a = ap.parse_args()
    attention_plans.DEC_SWEEP = a.decode_sweep
    planner = qsa_plan.Planner(a.qsa, a.target, a.matrix)
    if a.plan_only:
        return qsa_plan.plan_only(planned(Qsa(planner, None), a.check or not a.bench, a.bench or not a.check,
                                          a.decode_only, a.fwd_sweep), sys.stdout)
    import torch  # after --plan-only, which needs no torch
    from attention_tables import mma_limit, run_bench, run_check

    qsa = Qsa(planner, qsa_plan.CupyLauncher(a.kernels))
    qsa_plan.check_device(qsa.plan(bench_shape(*DECODE[0][1:])))
    dev = torch.cuda.get_device_name(0)
    head = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {dev}, torch {torch.__version__}"
    rc = 0
    if a.check:
        text, ok = run_check(qsa, a.out, mma_limit(a.matrix))
        with open(os.path.join(a.out, "check.md"), "w") as f:
            f.write(f"# selection attention: errors vs FP64 ({head})\n\n{text}\n")
        rc |= 0 if ok else 1
        print("CHECK", "PASS" if ok else "FAIL", flush=True)
    if a.bench:
        # No autotune results carried over from another process: fla keys its configs on
        # (BS, BK, BV, G), not T, so a cached choice made at another shape would be reused
        # here (bench/attn_bwd_forms.py says what that cost).
        os.environ.setdefault("FLA_CACHE_RESULTS", "0")
        try:
            import fla  # noqa: F401
            fla_mod = fla
        except Exception as e:
            print("fla does not import:", repr(e), flush=True)
            fla_mod = None
        text = run_bench(qsa, a.out, fla_mod, decode=not a.prefill_only, decode_only=a.decode_only,
                         fwd_sweep=a.fwd_sweep)
        with open(os.path.join(a.out, "bench.md"), "w") as f:
            f.write(f"# selection attention benchmark ({head})\n\n"
                    f"`python3 bench/attention_vs_torch.py --bench`; medians of CUDA-event timings after warm-up; "
                    f"launches from `{a.qsa} plan --target {a.target}`\n\n"
                    f"{text}\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())

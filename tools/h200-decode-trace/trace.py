"""Development probe: where the selection-attention decode's time goes, step by step, on an sm_90
card (issue 13's decode goals). Not a bench: the side-by-side figures come from
bench/attention_vs_torch.py. The launches are the runner's plans (`qsa plan`, bench/qsa_plan.py),
run from a cubin of the same source built with -DQSA_DEC_TRACE, whose kernels stamp the GPU's
nanosecond clock (%globaltimer) at each step into the __device__ array dec_trace[CTA][warp][step]
(kernels/common/attention_decode_unit.h, DEC_STAMP). The build never sets that macro, so no
shipped kernel carries the stamps (and their stores are not free: compare the trace build's
median with the bench's, printed below, before reading absolute times). Usage (repository root):

    nvcc -cubin -arch=sm_90a -O3 -Ikernels -DQSA_DEC_TRACE -Werror all-warnings \
        kernels/selection_attention.cu -o build/trace/selection_attention.cubin
    python3 tools/h200-decode-trace/trace.py --qsa .h200/qsa --kernels build/trace [--switch K=V ...] [--dump DIR]
    python3 tools/h200-decode-trace/trace.py --from docs/results/session21-2026-12-04/g/stamps.npz  # no GPU

For each decode shape of the side by side (same inputs: bench/attention_problem.decode_problem),
after warm-up calls, RUNS single launches each stamp every warp; the table gives, per step, the
stamp's time after the launch's first entry stamp (min / median / max over all warps of all CTAs,
then the median over the runs of each), and per CTA the spread of its warps' loop ends (the wait at
the merge's first barrier). Needs torch, cupy, numpy and the `qsa` binary of the same checkout;
--from needs numpy only."""
import argparse
import os
import statistics
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import qsa_plan  # noqa: E402
from attention_plans import D, DECODE, Qsa, bench_shape, dec_note  # noqa: E402

# The kernel's DEC_T_* steps, in order (kernels/common/attention_decode_unit.h).
STEPS = ("entry", "list ready", "first unit landed", "loop end", "merge barrier 1 (all loops done)",
         "merge barrier 2 (partials stored)", "merge barrier 3 (weights)", "CTA merge end",
         "cluster barrier passed", "end")
TRACE_CTAS, WARPS = 1024, 8
RUNS = 9
# A clock step from which the tables are read to that step, not to the printed 0.01 us. (The
# 256 ns steps of session 20's call C were this tool's own rounding, relative_ns says how; the
# H200's clock stepped in 32 ns in session 21.)
COARSE_NS = 100


def one_run(call, stamps, cp, torch):
    """One launch's stamps: `stamps` is the module's dec_trace array, zeroed before the call."""
    stamps.fill(0)
    torch.cuda.synchronize()
    call()
    torch.cuda.synchronize()
    return cp.asnumpy(stamps)


def clock_step_ns(runs, ctas, warps):
    """The step of the stamps' clock in ns: the greatest common divisor of every stamp's distance
    from its run's first one (32 ns on the H200 in session 21's calls E-G). The clock is the
    driver's, so each run says what it got. None when there are fewer than two distinct stamps
    (nothing to measure a step from)."""
    step = 0
    for st in runs:
        x = st[:ctas, :warps].astype(np.int64)
        x = x[x != 0]
        if x.size:
            step = int(np.gcd.reduce(x - x.min(), initial=step))
    return step or None


def clock_note(step):
    """The table header's words for the clock step (COARSE_NS and above: read to that step)."""
    if step is None:
        return "clock step unknown (fewer than two distinct stamps)"
    if step >= COARSE_NS:
        return f"the clock stepped in {step} ns in this run: every time below is good to {step / 1e3:.2f} us only"
    return f"clock step {step} ns"


def relative_ns(stamps):
    """Stamps (uint64 ns of %globaltimer, 0 where nothing stamped) as float64 ns after the first
    entry stamp, NaN where nothing stamped. The subtraction comes first, in integers: the clock
    counts from the Unix epoch on some machines (about 1.8e18 ns), where float64's spacing is
    256 ns, so converting the absolute stamps first rounded every time to a quarter microsecond
    (session 20's call C and session 21's call E, read then as a coarse clock)."""
    st = stamps.astype(np.int64)
    present = st != 0
    t0 = st[:, :, 0][present[:, :, 0]].min()
    return np.where(present, (st - t0).astype(np.float64), np.nan)


def summarize(runs, ctas, warps):
    """Per step: (min, median, max) us after the run's first entry over every warp's stamp, and
    (median, max) over CTAs of the step's own time in a CTA (its last warp's stamp minus its last
    warp's stamp of the step before), each the median over the runs; and the median over runs
    of the median and largest per-CTA spread of its warps' loop ends."""
    warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: steps a kernel does not stamp
    per_step = {s: [] for s in range(len(STEPS))}
    own = {s: [] for s in range(len(STEPS))}
    spreads = []
    for raw in runs:
        st = relative_ns(raw[:ctas, :warps])  # ns after the run's first entry
        cta_t = np.nanmax(st, axis=1)  # [cta, step]: the CTA's last warp
        prev = cta_t[:, 0]
        for s in range(len(STEPS)):
            x = st[:, :, s]
            x = x[~np.isnan(x)]
            if not x.size:
                continue
            us = x / 1e3
            per_step[s].append((us.min(), np.median(us), us.max()))
            d = (cta_t[:, s] - prev) / 1e3
            own[s].append((np.nanmedian(d), np.nanmax(d)))
            prev = cta_t[:, s]
        loop = st[:, :, 3]
        spread = (np.nanmax(loop, axis=1) - np.nanmin(loop, axis=1)) / 1e3
        spreads.append((np.nanmedian(spread), np.nanmax(spread)))
    rows = []
    for s, vals in per_step.items():
        if vals:
            rows.append((STEPS[s], *(statistics.median(v[i] for v in vals) for i in range(3)),
                         *(statistics.median(v[i] for v in own[s]) for i in range(2))))
    return rows, tuple(statistics.median(v[i] for v in spreads) for i in range(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="build/trace", help="folder of the -DQSA_DEC_TRACE selection_attention.cubin")
    ap.add_argument("--dump", metavar="DIR", help="also save each shape's raw stamps as DIR/<shape>-g<G>.npy "
                    "([run, CTA, warp, step], ns, 0 where nothing stamped)")
    ap.add_argument("--switch", action="append", default=[], metavar="KEY=VALUE",
                    help="a decode switch for every plan (e.g. QSA_ATTN_DEC_DIMS=half)")
    ap.add_argument("--from", dest="saved", metavar="FILE",
                    help="no GPU: print the tables of stamps saved before (a --dump .npy, or an .npz of them)")
    qsa_plan.add_plan_args(ap)
    a = ap.parse_args()
    if a.saved:
        return print_saved(a.saved)
    sw = dict(kv.split("=", 1) for kv in a.switch)
    planner = qsa_plan.Planner(a.qsa, a.target, a.matrix)
    cubin = f"{a.kernels}/selection_attention.cubin"
    if not os.path.isfile(cubin):
        sys.exit(f"error: {cubin} is missing: build it with -DQSA_DEC_TRACE first (see --help)")
    import cupy as cp
    import torch
    from attention_problem import decode_problem
    from attention_timing import time_graph

    launcher = qsa_plan.CupyLauncher(a.kernels)
    qsa = Qsa(planner, launcher)
    for name, B, Tq, Tk, hq, hkv in DECODE:
        try:
            plan = qsa.plan(bench_shape(B, Tq, Tk, hq, hkv), sw=sw)
        except qsa_plan.PlanError as e:  # a switch this shape has no kernel for: the next shape
            print(f"{name} g{hq // hkv}: refused: {e}")
            continue
        fwd = next(s for s in plan["call"] if "fwd" in s.get("kernel", ""))
        if "_dec_" not in fwd["kernel"]:
            print(f"{name} g{hq // hkv}: {fwd['kernel']} is not the decode kernel, skipped")
            continue
        P = decode_problem(B, Tq, Tk, hq, hkv)
        rows = B * Tq * hq
        o, lse = torch.empty(rows * D, device="cuda"), torch.empty(rows, device="cuda")
        call = qsa.fwd(P, o, lse, plan)
        call.setup()
        med = time_graph(call)[0] * 1e3
        trace = launcher.modules[plan["module"]].get_global("dec_trace")
        stamps = cp.ndarray((TRACE_CTAS, WARPS, len(STEPS)), dtype=cp.uint64, memptr=trace)
        for _ in range(20):  # warm: the same L2 state as the bench's replays
            call()
        runs = [one_run(call, stamps, cp, torch) for _ in range(RUNS)]
        ctas = fwd["grid"][0] * fwd["grid"][1]
        warps = fwd["block"][0] // 32
        if a.dump:
            os.makedirs(a.dump, exist_ok=True)
            stem = "".join(ch if ch.isalnum() else "_" for ch in name)
            np.save(os.path.join(a.dump, f"{stem}-g{hq // hkv}.npy"),
                    np.stack([st[:ctas, :warps] for st in runs]))
        print(f"\n{name} g{hq // hkv} ({dec_note(plan)}; {fwd['kernel']}; switches {sw or 'none'}): "
              f"trace build's graph median {med:.1f} us; {RUNS} single launches; ", end="")
        print_tables(runs, ctas, warps)


def print_tables(runs, ctas, warps):
    """The clock's step, the per-step table and the loop-end spread of one shape's runs."""
    table, spread = summarize(runs, ctas, warps)
    print(clock_note(clock_step_ns(runs, ctas, warps)))
    print("| step | min us | median us | max us | its own time in a CTA: median / max us |\n|---|---|---|---|---|")
    for step, lo, mid, hi, own_med, own_max in table:
        print(f"| {step} | {lo:.2f} | {mid:.2f} | {hi:.2f} | {own_med:.2f} / {own_max:.2f} |")
    print(f"spread of one CTA's warps' loop ends: median {spread[0]:.2f} us, largest {spread[1]:.2f} us")


def print_saved(path):
    """The tables of a --dump file ([run, CTA, warp, step]), or of each array in an .npz of them."""
    if not os.path.isfile(path):
        sys.exit(f"error: {path} does not exist (a --dump .npy, or an .npz of them)")
    saved = np.load(path)
    arrays = saved.items() if isinstance(saved, np.lib.npyio.NpzFile) else [(os.path.basename(path), saved)]
    for name, a in arrays:
        if a.ndim != 4 or a.shape[3] != len(STEPS):
            sys.exit(f"error: {path}: {name} has shape {a.shape}, not [run, CTA, warp, {len(STEPS)} steps]")
        print(f"\n{name}: {a.shape[0]} runs, {a.shape[1]} CTAs x {a.shape[2]} warps (saved stamps); ", end="")
        print_tables(list(a), a.shape[1], a.shape[2])


if __name__ == "__main__":
    sys.exit(main())

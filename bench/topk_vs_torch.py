#!/usr/bin/env python3
"""qsa top-k (kernels/topk.cu) side by side with torch.topk on the same inputs and GPU.

Usage (on a CUDA machine with torch, cupy and numpy; no Rust needed, the `qsa` binary is):
    python3 bench/topk_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 [--quick] [--out table.md]
    python3 bench/topk_vs_torch.py --qsa target/debug/qsa --plan-only     # no GPU: the launches, as JSON
    ... --flashinfer .flashinfer    # also flashinfer.top_k, from the folder tools/flashinfer-carry/ builds
    ... --quick --sweep 'win:QSA_TOPK_KERNEL=spec,QSA_TOPK_SPEC_FINAL=window' --sweep ...
                                    # also each labelled set of qsa switches (`qsa plan --switch`)

Every launch comes from `qsa plan --json` (the plan the Rust runner executes: kernel, grid,
block, shared bytes, arguments, workspaces; see bench/qsa_plan.py), for the engine's
dispatch (variant auto) and for forced kernels (matrix.yaml's variants, e.g. wide). The ids
of every case are checked exactly against a numpy implementation of the selection contract
(DESIGN.md), and each side is timed as the median over repetitions of a CUDA graph that
replays the call 20 times (after warm-up), per call. torch.topk runs with sorted=False;
"+sort" adds torch.sort of the indices, which is what it takes to match our ascending
output. With --flashinfer DIR, flashinfer.top_k (bench/flashinfer_peer.py) is timed the same
way and its ids compared with the contract's as a set. Prints a Markdown table with the date
and device name.
"""
import argparse
import datetime
import json
import statistics
import sys

import numpy as np

import qsa_plan

# ---------------------------------------------------------------------------------------
# The contract, in numpy.
def order_keys(x):
    """qsa_order_key: monotone u32 of the f32 score, -0.0 as +0.0, NaN below -inf."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).copy()
    u[u == 0x80000000] = 0
    nan = ((u & 0x7F800000) == 0x7F800000) & ((u & 0x007FFFFF) != 0)
    k = np.where(u & 0x80000000, ~u, u | 0x80000000).astype(np.uint32)
    k[nan] = 0
    return k


def reference_ids(scores, nq, n, capacity, k, active=None):
    """Per query the k selected ids ascending, -1 past the count."""
    out = np.full((nq, k), -1, dtype=np.int32)
    rows = scores.reshape(nq, capacity)[:, :n]
    keys = order_keys(rows)
    for q in range(nq):
        m = n if active is None else int(min(max(active[q], 0), n))
        if m == 0:
            continue
        if k >= m:
            out[q, :m] = np.arange(m, dtype=np.int32)
            continue
        # Larger key first, then lower index: one 64-bit sort key, smallest first.
        comp = ((0xFFFFFFFF - keys[q, :m].astype(np.uint64)) << np.uint64(32)) | np.arange(m, dtype=np.uint64)
        top = np.partition(comp, k - 1)[:k] & np.uint64(0xFFFFFFFF)
        out[q] = np.sort(top.astype(np.int64)).astype(np.int32)
    return out


# ---------------------------------------------------------------------------------------
# Our kernels: every call a plan of `qsa plan` (this script derives no launch rule).
def planned(planner, cases, sweeps=()):
    """(label, plan) of every call this bench launches: the dispatched kernel, then each
    forced variant of the case, then each sweep (label, qsa switches over auto), whose
    launches differ from those already listed (a forced kernel that the dispatch already
    takes runs once, as auto). A sweep's plan is labelled with the sweep's label."""
    for label, nq, n, cap, k, extra in cases:
        seen = set()
        shape = dict(nq=nq, n=n, capacity=cap, k=k)
        runs = [(v, v, None) for v in ["auto"] + extra] + [(name, "auto", sw) for name, sw in sweeps]
        for name, variant, switches in runs:
            plan = planner.plan("topk", shape, variant, switches)
            key = json.dumps(plan["call"], sort_keys=True)
            if key not in seen:
                seen.add(key)
                if switches:
                    plan = dict(plan, variant=name)
                yield f"{label} {nq}x{n} k={k} {name}", plan


# ---------------------------------------------------------------------------------------
def time_graph(fn, inner=20, reps=25, warmup=3):
    """Median microseconds per call of `fn`, replayed `inner` times in one CUDA graph."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(inner):
            fn()
    for _ in range(warmup):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / inner)
    return statistics.median(times), (max(times) - min(times))


CASES = [
    # (label, nq, n, capacity, k, matrix.yaml variants forcing a kernel, besides auto)
    ("decode", 1, 262144, 262144, 2048, ["split", "spec", "cluster", "wide"]),
    ("decode", 2, 262144, 262144, 2048, []),
    ("decode", 3, 262144, 262144, 2048, ["split", "spec", "cluster", "wide"]),
    ("decode", 16, 262144, 262144, 2048, ["split", "spec", "cluster", "wide"]),
    ("decode", 3, 131072, 262144, 2048, ["split", "spec", "wide"]),
    ("decode", 3, 65536, 262144, 2048, ["split", "spec", "wide"]),
    ("decode", 3, 40960, 262144, 2048, ["split", "spec", "wide"]),
    ("prefill", 256, 2048, 2048, 16, []),
    ("prefill", 256, 4096, 4096, 16, []),
    ("prefill", 256, 32768, 32768, 16, []),
]

# The shapes the performance goals name (decode 1 / 3 / 16 queries, prefill 256 rows).
QUICK_CASES = [(c[0], c[1], c[2], c[3], c[4], []) for c in CASES
               if (c[1], c[2]) in {(1, 262144), (3, 262144), (16, 262144), (256, 2048), (256, 4096), (256, 32768)}]


def flashinfer_cells(fi, compare_sets, view, k, want):
    """' us | same set/differs |' for flashinfer.top_k on this case; ' n/a | n/a (why) |' if it
    refuses the case."""
    rows = fi.packed(view)
    try:
        ids = fi(rows, k)[1]
        verdict = compare_sets(ids.cpu().numpy(), want)
        t, _ = time_graph(lambda: fi(rows, k))
    except Exception as e:  # a peer refusing a shape is a table entry, not the end of the run
        why = str(e).splitlines()[0][:80].replace("|", "/") if str(e) else ""
        return f" n/a | n/a ({type(e).__name__}: {why}) |"
    return f" {t:.1f} | {verdict} |"


def parse_sweep(text):
    """'LABEL:K=V,K=V' -> (LABEL, {K: V})."""
    label, sep, rest = text.partition(":")
    pairs = [p.partition("=") for p in rest.split(",") if p]
    if not sep or not label or any(not eq or not k for k, eq, _ in pairs):
        raise argparse.ArgumentTypeError(f"--sweep {text!r}: expected LABEL:SWITCH=VALUE[,SWITCH=VALUE...]")
    return label, {k: v for k, _, v in pairs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="build/kernels/sm_90",
                    help="folder of the target's code objects (topk.cubin), default %(default)s")
    ap.add_argument("--out", help="also write the Markdown table here")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="only the goal shapes, dispatched kernels only")
    ap.add_argument("--flashinfer", metavar="DIR",
                    help="also time flashinfer.top_k, loaded from DIR (built by tools/flashinfer-carry/assemble.py)")
    ap.add_argument("--sweep", action="append", type=parse_sweep, default=[], metavar="LABEL:K=V,...",
                    help="also run each case's auto plan under these qsa switches (repeatable); only on the "
                         "decode cases unless the switches name no QSA_TOPK_SPEC_* / QSA_TOPK_KERNEL=spec")
    qsa_plan.add_plan_args(ap)
    args = ap.parse_args()
    planner = qsa_plan.Planner(args.qsa, args.target, args.matrix)
    cases = QUICK_CASES if args.quick else CASES
    def sweeps_for(label):
        return [(name, sw) for name, sw in args.sweep
                if label == "decode" or not any(k.startswith("QSA_TOPK_SPEC") or v == "spec" for k, v in sw.items())]

    if args.plan_only:
        plans = (p for c in cases for p in planned(planner, [c], sweeps_for(c[0])))
        return qsa_plan.plan_only(plans, sys.stdout)

    import torch

    dev = torch.cuda.get_device_name()
    launcher = qsa_plan.CupyLauncher(args.kernels)
    fi = None
    if args.flashinfer:
        from flashinfer_peer import FlashInferTopK, compare_sets

        fi = FlashInferTopK(args.flashinfer)
    rng = np.random.default_rng(args.seed)
    lines = [
        f"qsa top-k vs torch.topk — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {dev}, "
        f"torch {torch.__version__}; uniform [0,1) scores; median us per call of a CUDA graph replaying 20 calls, "
        "25 replays after warm-up; ids of ours checked exactly against the contract (numpy); launches from "
        f"`{args.qsa} plan --target {args.target}`.",
        "",
        "| case | nq x n (cap) | k | variant | kernel | ours us | torch.topk us | topk+sort(ids) us | speedup vs topk | ids |"
        + (" flashinfer us | flashinfer ids |" if fi else ""),
        "|---|---|---|---|---|---:|---:|---:|---:|---|" + ("---:|---|" if fi else ""),
    ]
    if fi:
        lines[0] += (f" flashinfer.top_k {fi.version} (default arguments: unsorted, no tie-break; rows with a "
                     "capacity past n packed first, outside the timing), its ids compared with the contract's as sets.")
    failed = False
    checked_device = False
    for label, nq, n, cap, k, extra in cases:
        host = rng.random(nq * cap, dtype=np.float32)
        scores = torch.from_numpy(host).cuda()
        want = reference_ids(host, nq, n, cap, k)
        view = scores.view(nq, cap)[:, :n]
        t_topk, _ = time_graph(lambda: torch.topk(view, k, dim=1, sorted=False))
        t_sort, _ = time_graph(lambda: torch.sort(torch.topk(view, k, dim=1, sorted=False).indices, dim=1))
        fi_cells = ""
        if fi:
            fi_cells = flashinfer_cells(fi, compare_sets, view, k, want)
        for _, plan in planned(planner, [(label, nq, n, cap, k, extra)], sweeps_for(label)):
            if not checked_device:
                qsa_plan.check_device(plan)
                checked_device = True
            out = torch.empty(nq * k, dtype=torch.int32, device="cuda")
            fn = qsa_plan.Call(plan, launcher, bind={"scores": scores, "out": out}, alloc=qsa_plan.torch_alloc)
            fn.setup()
            fn()
            torch.cuda.synchronize()
            got = out.cpu().numpy().reshape(nq, k)
            ok = np.array_equal(got, want)
            failed |= not ok
            t, _ = time_graph(fn)
            lines.append(
                f"| {label} | {nq} x {n} ({cap}) | {k} | {plan['variant']} | {plan['dispatched']} | {t:.1f} | "
                f"{t_topk:.1f} | {t_sort:.1f} | {t_topk / t:.2f}x | {'exact' if ok else 'MISMATCH'} |{fi_cells}"
            )
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print()
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

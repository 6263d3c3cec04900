#!/usr/bin/env python3
"""qsa top-k (kernels/topk.cu) side by side with torch.topk on the same inputs and GPU.

Usage (on a CUDA machine with torch, cupy and numpy):
    python3 bench/topk_vs_torch.py --cubin build/sm_90/topk.cubin [--out table.md]

Loads the cubin with cupy.RawModule, launches our kernels with the host rules of
src/gpu/topk.rs (dispatch as src/dispatch/topk.rs, or a forced kernel), checks every case's
ids exactly against a numpy implementation of the selection contract (DESIGN.md), and times
each side as the median over repetitions of a CUDA graph that replays the call 20 times
(after warm-up), per call. torch.topk runs with sorted=False; "+sort" adds torch.sort of the
indices, which is what it takes to match our ascending output. Prints a Markdown table with
the date and device name.
"""
import argparse
import datetime
import statistics
import sys

import numpy as np

REGISTER_MAX_N = 8192
SPLIT_CHUNK = 4096
SPLIT_MAX_QUERIES = 16
SPLIT_THREADS = 512
WIDE_THREADS = 1024
REGISTER_ITEMS = 8
STATIC_SHARED_BYTES = 4096


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
# Our kernels, launched as src/gpu/topk.rs launches them.
def dispatch(nq, n, k, has_active):
    if n <= REGISTER_MAX_N:
        return "register"
    if not has_active and nq <= SPLIT_MAX_QUERIES:
        return "split"
    return "wide"


def register_threads(n):
    need = -(-(-(-n // REGISTER_ITEMS)) // 64) * 64
    return min(max(need, 256), 1024)


def split_chunks(n):
    return max(1, -(-n // SPLIT_CHUNK))


def split_workspace_words(nq, n, k):
    m = split_chunks(n)
    kc = min(k, SPLIT_CHUNK)
    return nq + 2 * nq * m + 2 * nq * m * kc


class QsaTopk:
    def __init__(self, cubin):
        import cupy

        self.cp = cupy
        self.mod = cupy.RawModule(path=cubin)
        self.fn = {
            name: self.mod.get_function("qsa_topk_" + name)
            for name in ("register", "wide", "split_bound", "split_select")
        }
        dev = cupy.cuda.Device()
        self.max_shared = dev.attributes["MaxSharedMemoryPerBlockOptin"]
        # Opt the wide kernel into more than 48 KiB of dynamic shared memory.
        self.fn["wide"].max_dynamic_shared_size_bytes = self.max_shared - STATIC_SHARED_BYTES

    def call(self, kernel, scores, capacity, nq, n, k, active, out, ws=None):
        """Enqueue on torch's current stream (so CUDA graph capture sees it)."""
        import torch

        cp = self.cp
        i32 = np.int32
        sc = cp.asarray(scores)
        o = cp.asarray(out)
        act = cp.asarray(active) if active is not None else np.uint64(0)
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            if kernel == "register":
                self.fn["register"]((nq,), (register_threads(n),), (sc, i32(capacity), i32(nq), i32(n), i32(k), act, o))
            elif kernel == "wide":
                staged = n * 4 + STATIC_SHARED_BYTES <= self.max_shared
                self.fn["wide"](
                    (nq,), (WIDE_THREADS,), (sc, i32(capacity), i32(nq), i32(n), i32(k), act, o, i32(staged)),
                    shared_mem=n * 4 if staged else 0,
                )
            elif kernel == "split":
                assert active is None, "the split is the decode form"
                w = cp.asarray(ws)
                grid = (split_chunks(n), nq)
                self.fn["split_bound"](grid, (SPLIT_THREADS,), (sc, i32(capacity), i32(nq), i32(n), i32(k), w))
                self.fn["split_select"](grid, (SPLIT_THREADS,), (sc, i32(capacity), i32(nq), i32(n), i32(k), w, o))
            else:
                raise ValueError(kernel)

    def prepare(self, kernel, scores, capacity, nq, n, k, active=None):
        """A closure that runs one call, with its own output and workspace."""
        import torch

        out = torch.empty(nq * k, dtype=torch.int32, device="cuda")
        ws = None
        if kernel == "split":
            ws = torch.zeros(split_workspace_words(nq, n, k), dtype=torch.int32, device="cuda")
        return out, (lambda: self.call(kernel, scores, capacity, nq, n, k, active, out, ws))


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
    # (label, nq, n, capacity, k, forced kernels besides dispatch)
    ("decode", 1, 262144, 262144, 2048, ["wide"]),
    ("decode", 2, 262144, 262144, 2048, []),
    ("decode", 3, 262144, 262144, 2048, ["wide"]),
    ("decode", 16, 262144, 262144, 2048, ["wide"]),
    ("decode", 3, 131072, 262144, 2048, ["wide"]),
    ("decode", 3, 65536, 262144, 2048, ["wide"]),
    ("decode", 3, 40960, 262144, 2048, ["wide"]),
    ("prefill", 256, 2048, 2048, 16, []),
    ("prefill", 256, 4096, 4096, 16, []),
    ("prefill", 256, 32768, 32768, 16, []),
]

# The shapes the performance goals name (decode 1 / 3 / 16 queries, prefill 256 rows).
QUICK_CASES = [(c[0], c[1], c[2], c[3], c[4], []) for c in CASES if (c[1], c[2]) in {(1, 262144), (3, 262144), (16, 262144), (256, 32768)}]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cubin", required=True, help="topk.cubin built for this GPU")
    ap.add_argument("--out", help="also write the Markdown table here")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="only the goal shapes, dispatched kernels only")
    args = ap.parse_args()

    import torch

    dev = torch.cuda.get_device_name()
    ours = QsaTopk(args.cubin)
    rng = np.random.default_rng(args.seed)
    lines = [
        f"qsa top-k vs torch.topk — {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {dev}, "
        f"torch {torch.__version__}; uniform [0,1) scores; median us per call of a CUDA graph replaying 20 calls, "
        "25 replays after warm-up; ids of ours checked exactly against the contract (numpy).",
        "",
        "| case | nq x n (cap) | k | kernel | ours us | torch.topk us | topk+sort(ids) us | speedup vs topk | ids |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    failed = False
    for label, nq, n, cap, k, extra in QUICK_CASES if args.quick else CASES:
        host = rng.random(nq * cap, dtype=np.float32)
        scores = torch.from_numpy(host).cuda()
        want = reference_ids(host, nq, n, cap, k)
        view = scores.view(nq, cap)[:, :n]
        t_topk, _ = time_graph(lambda: torch.topk(view, k, dim=1, sorted=False))
        t_sort, _ = time_graph(lambda: torch.sort(torch.topk(view, k, dim=1, sorted=False).indices, dim=1))
        for kernel in [dispatch(nq, n, k, False)] + extra:
            out, fn = ours.prepare(kernel, scores, cap, nq, n, k)
            fn()
            torch.cuda.synchronize()
            got = out.cpu().numpy().reshape(nq, k)
            ok = np.array_equal(got, want)
            failed |= not ok
            t, _ = time_graph(fn)
            lines.append(
                f"| {label} | {nq} x {n} ({cap}) | {k} | {kernel} | {t:.1f} | {t_topk:.1f} | {t_sort:.1f} | "
                f"{t_topk / t:.2f}x | {'exact' if ok else 'MISMATCH'} |"
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

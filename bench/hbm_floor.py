"""The read floor under qsa's selection-attention decode, on one CUDA GPU (issue 13's decode goals).

For each decode shape of bench/attention_vs_torch.py (same seed, same ids), in one run:
  - qsa's decode forward as the runner dispatches it (auto), and its copies-only ablation
    (QSA_ATTN_DEC_PROBE=no_math: the same K/V copies, no math, output not the attention);
  - the same K/V bytes read by the plainest fast reader (bench/kernels/hbm_read.cu: 16-byte
    non-coherent loads, 8 rows in flight per thread, no shared memory, no math), over a sweep of
    grid sizes, in three address patterns: the decode's own (fla's [B, Tk, H, D] layout: a block
    is 64 rows of 256 B at a 2 KiB stride), head-major blocks (16 KiB contiguous, at the same
    random places) and one contiguous stretch of the same size.
The reader's time is what the memory system needs for those bytes in that pattern; a decode
kernel that reads them all cannot beat it. Timing: bench/attention_timing.time_graph (median of
CUDA-graph replays, 20 calls each; `L2 cold` rows flush a 256 MB buffer before each call and
subtract it), the same as the side-by-side bench's decode rows. The reader reads whole blocks,
so at the causal edge it reads up to 63 rows more than the decode does (under 0.1% of the bytes).

    nvcc -cubin -arch=sm_90 -O3 -o build/bench/hbm_read.cubin bench/kernels/hbm_read.cu
    python3 bench/hbm_floor.py --qsa .h200/qsa --kernels build/kernels/sm_90 --reader build/bench --out DIR

Needs: torch, cupy, numpy, a CUDA GPU, and the `qsa` binary of the same checkout. Writes DIR/floor.md.
"""
import argparse
import datetime
import os
import sys

import numpy as np

import qsa_plan
from attention_plans import BLK, D, DECODE, Qsa, bench_shape, dec_note

ROW_BYTES = D * 2  # one bf16 key or value row
THREADS = 256
CTAS_PER_SM = (1, 2, 4, 8, 16)


def block_starts(P, layout):
    """Byte offsets (into K and into V) of every selected block of P, and the row stride inside a
    block, for `layout`: nhd (P's own tensors), hnd (head-major), contiguous (packed)."""
    import torch

    B, Tq, Tk, hkv = P["batch"], P["q_len"], P["kv_len"], P["hkv"]
    ids = P["ids"].long()  # [B, Tq, hkv, t], distinct causal ids, -1 = none
    b = torch.arange(B, device="cuda")[:, None, None, None].expand_as(ids)
    g = torch.arange(hkv, device="cuda")[None, None, :, None].expand_as(ids)
    keep = ids >= 0
    ids, b, g = ids[keep], b[keep], g[keep]
    if layout == "nhd":
        starts, stride = ((b * Tk + ids * BLK) * hkv + g) * ROW_BYTES, hkv * ROW_BYTES
    elif layout == "hnd":
        starts, stride = ((b * hkv + g) * Tk + ids * BLK) * ROW_BYTES, ROW_BYTES
    else:
        starts, stride = torch.arange(ids.numel(), device="cuda") * BLK * ROW_BYTES, ROW_BYTES
    return starts.contiguous(), stride


# qsa's rows: the dispatched decode, and its copies alone (an ablation: output not the attention).
QSA_ROWS = (("qsa decode (auto)", {}), ("qsa decode probe=no_math", {"QSA_ATTN_DEC_PROBE": "no_math"}))


def planned(qsa):
    """(shape's DECODE entry, label, plan) of every qsa call this bench makes (--plan-only lists them)."""
    for entry in DECODE:
        for label, sw in QSA_ROWS:
            yield entry, label, qsa.plan(bench_shape(*entry[1:]), sw=sw)


class Reader:
    """hbm_read_blocks over one pattern, launched on torch's current stream."""

    def __init__(self, launcher, k, v, starts, stride):
        import torch

        self.launcher, self.k, self.v, self.starts, self.stride = launcher, k, v, starts, stride
        self.sink = torch.zeros(1, dtype=torch.int32, device="cuda")  # the liveness store's target
        self.ctas = None

    def __call__(self):
        p = self.launcher.pointer
        self.launcher.launch("hbm_read", "hbm_read_blocks", (self.ctas, 1, 1), (THREADS, 1, 1),
                             (p(self.k), p(self.v), p(self.starts), np.int32(self.starts.numel()),
                              np.int32(BLK), np.int64(self.stride), p(self.sink)), 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="build/kernels/sm_90", help="folder of selection_attention.cubin")
    ap.add_argument("--reader", default="build/bench", help="folder of hbm_read.cubin")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    qsa_plan.add_plan_args(ap)
    a = ap.parse_args()
    planner = qsa_plan.Planner(a.qsa, a.target, a.matrix)
    if a.plan_only:
        return qsa_plan.plan_only(((f"{e[0]}, {e[4]}/{e[5]} heads: {label}", plan)
                                   for e, label, plan in planned(Qsa(planner, None))), sys.stdout)
    for path in (f"{a.kernels}/selection_attention.cubin", f"{a.reader}/hbm_read.cubin"):
        if not os.path.isfile(path):
            sys.exit(f"error: {path} is missing: build it first (see this file's --help)")
    import torch
    from attention_problem import decode_problem, hnd_of
    from attention_timing import time_graph

    qsa = Qsa(planner, qsa_plan.CupyLauncher(a.kernels))
    qsa_plan.check_device(qsa.plan(bench_shape(*DECODE[0][1:])))
    reader_launcher = qsa_plan.CupyLauncher(a.reader)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dev = torch.cuda.get_device_name(0)
    head = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {dev} ({sms} SMs), torch {torch.__version__}"
    lines = ["| shape | row | median us (min-max) | K/V bytes | TB/s | note |", "|---|---|---|---|---|---|"]

    def add(name, label, t, nbytes, note=""):
        med, lo, hi = (x * 1e3 for x in t)
        lines.append(f"| {name} | {label} | {med:.1f} ({lo:.1f}-{hi:.1f}) | {nbytes / 1e6:.1f} MB | "
                     f"{nbytes / (med * 1e-6) / 1e12:.2f} | {note} |")
        print(lines[-1], flush=True)

    plans = list(planned(qsa))
    for entry in DECODE:
        name, B, Tq, Tk, hq, hkv = entry
        P = decode_problem(B, Tq, Tk, hq, hkv)
        name = f"{name}, {hq}/{hkv} heads"
        rows = B * Tq * hq
        o, lse = torch.empty(rows * D, device="cuda"), torch.empty(rows, device="cuda")
        nbytes = int((P["ids"] >= 0).sum().item()) * BLK * ROW_BYTES * 2
        for label, plan in ((label, plan) for e, label, plan in plans if e is entry):
            call = qsa.fwd(P, o, lse, plan)
            call.setup()
            add(name, label, time_graph(call), nbytes, dec_note(plan))
            if label == QSA_ROWS[0][0]:
                add(name, label + ", L2 cold", time_graph(call, cold=True), nbytes,
                    "256 MB write before each call, subtracted")
            del call
        Ph = hnd_of(P)
        for layout, (k, v) in (("nhd", (P["k"], P["v"])), ("hnd", (Ph["k"], Ph["v"])), ("contiguous", (P["k"], P["v"]))):
            starts, stride = block_starts(P, layout)
            r = Reader(reader_launcher, k, v, starts, stride)
            sweep = []
            for c in CTAS_PER_SM:
                r.ctas = c * sms
                sweep.append((time_graph(r), c))
            best, c = min(sweep, key=lambda x: x[0][0])
            r.ctas = c * sms
            others = ", ".join(f"{cc}/SM {t[0] * 1e3:.1f}" for t, cc in sweep)
            add(name, f"reader {layout}", best, nbytes, f"best of grids ({others} us); {THREADS} threads")
            add(name, f"reader {layout}, L2 cold", time_graph(r, cold=True), nbytes, f"{c} CTAs/SM")
            del r, starts
        del P, Ph, o, lse
        torch.cuda.empty_cache()
    print(f"wrote {a.out}/floor.md")
    text = "\n".join(lines)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "floor.md"), "w") as f:
        f.write(f"# the read floor under the decode ({head})\n\n{text}\n")


if __name__ == "__main__":
    main()

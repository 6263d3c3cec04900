#!/usr/bin/env python3
"""Block scores: qsa's kernels vs torch, side by side in one process on the same inputs.

S[q,b] = sum_h w[q,h] * relu(Q[q,h,:] . Kb[b,:]), head dim 128, f32.

Loads the target's block_scores.cubin with cupy, and launches every kernel exactly as the
Rust runner does: each call is a plan of `qsa plan --json` for a matrix.yaml variant (warp,
simt, auto = TF32 tensor cores where present, bf16), which names the kernel, grid, block,
shared bytes and arguments (bench/qsa_plan.py); this script derives no launch rule. Then
  1. checks every variant against an FP64 reference (RMSE, max abs error, and the ratio to
     the warp kernel's error on the same inputs), on ragged shapes and on the bench shapes;
     the warp and SIMT kernels are also compared bit for bit with a numpy emulation of the
     summation order the CPU backend reproduces;
  2. times each variant and torch (einsum + relu + weighted head sum, FP32 and TF32, plus
     the GEMM alone) with CUDA events: median of repetitions after warm-up;
  3. prints a Markdown table.

Usage: python3 bench/scores_vs_torch.py --qsa .h200/qsa --kernels build/kernels/sm_90 [--out DIR]
       python3 bench/scores_vs_torch.py --qsa target/debug/qsa --plan-only   # no GPU: the launches, as JSON
Needs: torch, cupy, numpy, a CUDA GPU, and the `qsa` binary of the same checkout. No Rust.
A variant whose dispatch gives the same kernel as an earlier one on a shape is run once.
Besides the variants, qsa's forcing switches add what the dispatch never picks on a shape:
the SIMT kernel below 8 queries (QSA_SCORES_KERNEL=simt), the other tensor-core CTA tile
(QSA_SCORES_TILE=wide|decode) and the SIMT kernel's other d-chunk (QSA_SCORES_SIMT_DC=16,
on every shape, so the small ones check its order bit for bit); their rows are labelled with
the switches.
"""
import argparse
import datetime
import math
import os
import sys

import numpy as np

import qsa_plan

cp = torch = None  # imported in main, after --plan-only (which needs neither)

HEAD_DIM = 128
# Ceilings of the H200 SXM (datasheet dense rates; HBM as measured on the machine).
PEAK = {"fp32": 67e12, "tf32": 494e12, "bf16": 989e12, "hbm": 4.3e12}

# matrix.yaml's scores variants, baseline first: the switches that pick each kernel. Then
# (label, variant, qsa switches) for kernels and tiles the dispatch leaves out on a shape.
# tf32_mma / bf16_mma: the mma.sync kernels where sm_90a's wgmma ones run (side by side).
VARIANTS = ["warp", "simt", "auto", "bf16", "tf32_mma", "bf16_mma"]
FORCED = [("simt:QSA_SCORES_KERNEL=simt", "simt", {"QSA_SCORES_KERNEL": "simt"}),
          ("auto:QSA_SCORES_TILE=wide", "auto", {"QSA_SCORES_TILE": "wide"}),
          ("auto:QSA_SCORES_TILE=decode", "auto", {"QSA_SCORES_TILE": "decode"}),
          ("simt:QSA_SCORES_KERNEL=simt,QSA_SCORES_SIMT_DC=16", "simt",
           {"QSA_SCORES_KERNEL": "simt", "QSA_SCORES_SIMT_DC": "16"})]
# The decode scorers' launch configurations (src/dispatch/scores/decode.rs; the default on
# sm_90 is 4 warps, 2 stages, 3 CTAs per SM): warps, ring depth and persistent CTAs per SM of
# the mma.sync kernels (ENGINE=mma: the ring switches are theirs), then sm_90a's wgmma decode
# kernels (src/dispatch/scores/decode_wg.rs: the sm_90a default since H200 call A1, 2 CTAs
# per SM; elsewhere ENGINE=wgmma falls back to mma.sync and the row is the same launch as
# another, run once).
MMA, WG = {"QSA_SCORES_DECODE_ENGINE": "mma"}, {"QSA_SCORES_DECODE_ENGINE": "wgmma"}
FORCED += [(f"{v}:{','.join(f'{k}={x}' for k, x in sw.items())}", v, sw) for v, sw in (
    ("auto", {**MMA, "QSA_SCORES_DECODE_WARPS": "8"}),
    ("auto", {**MMA, "QSA_SCORES_DECODE_STAGES": "3"}),
    ("auto", {**MMA, "QSA_SCORES_DECODE_STAGES": "4", "QSA_SCORES_DECODE_CTAS_PER_SM": "2"}),
    ("bf16", {**MMA, "QSA_SCORES_DECODE_WARPS": "8"}),
    ("bf16", {**MMA, "QSA_SCORES_DECODE_STAGES": "3"}),
    ("auto", {**MMA}),
    ("bf16", {**MMA}),
    ("auto", {**WG}),
    ("auto", {**WG, "QSA_SCORES_DECODE_CTAS_PER_SM": "1"}),
    ("auto", {**WG, "QSA_SCORES_DECODE_CTAS_PER_SM": "3"}),
    ("bf16", {**WG}),
    ("bf16", {**WG, "QSA_SCORES_DECODE_CTAS_PER_SM": "1"}),
    # More query groups than the dispatch sends to the decode tile (each group streams Kb):
    # at 2 / 4 x 64 x 262,144 against the wide tile the dispatch takes (MAX_GROUPS).
    ("auto", {**WG, "QSA_SCORES_TILE": "decode"}),
    # BF16 keeps decode::MAX_GROUPS (1): at 2 x 64 x 262,144 it ran the wide bf16_wgmma (96.6 us
    # in call P) where TF32's decode kernel took 66.5; this row measures BF16's decode kernel there.
    ("bf16", {**WG, "QSA_SCORES_TILE": "decode"}))]
# The wgmma decode kernels' staging and grid (src/dispatch/scores/decode_wg.rs): the register
# kernel on an even grid, then A through a cp.async ring of N tiles per warpgroup (_wgc: 2 CTAs
# per SM where shared memory holds them, else 1), two warpgroups sharing Q (_wgc2, 1 CTA per
# SM). Elsewhere (no wgmma, or a shape the decode tile does not take) the same launch as
# another row, run once.
RING, EVEN = "QSA_SCORES_DECODE_WG_RING", {"QSA_SCORES_DECODE_GRID": "even"}
GROUPS2 = {"QSA_SCORES_DECODE_WG_GROUPS": "2"}
DECODE_FORMS = [
    {**EVEN},
    {RING: "2"}, {RING: "2", **EVEN}, {RING: "3"}, {RING: "4"}, {RING: "6"},
    {RING: "2", **GROUPS2}, {RING: "3", **GROUPS2}, {RING: "3", **GROUPS2, **EVEN},
]
# The TMA-fed forms (_decode_tma: a producer warp, cp.async.bulk into an N-slot mbarrier ring,
# kernels/common/scores_decode_tma.h; _tma2: two consumer warpgroups, 1 CTA per SM). TF32: 2
# slots fit 2 CTAs per SM, 3+ one; BF16: up to 3 slots fit 2.
TMA = "QSA_SCORES_DECODE_WG_TMA"
DECODE_FORMS += [
    {TMA: "2"}, {TMA: "2", **EVEN}, {TMA: "3"}, {TMA: "4"}, {TMA: "6"},
    {TMA: "2", **GROUPS2}, {TMA: "4", **GROUPS2}, {TMA: "6", **GROUPS2}, {TMA: "4", **GROUPS2, **EVEN},
]
FORCED += [(f"{v}:{','.join(f'{k}={x}' for k, x in sw.items())}", v, sw)
           for v in ("auto", "bf16") for sw in ({**WG, **f} for f in DECODE_FORMS)]
# The wgmma kernels' units per CTA (sm_90a; elsewhere the same plan as the variant's, run once).
FORCED += [(f"{v}:QSA_SCORES_WG_UPC={u}", v, {"QSA_SCORES_WG_UPC": str(u)})
           for v in ("auto", "bf16") for u in (1, 2, 4, 8, 16)]
# sm_90a's wgmma kernels by QSA_SCORES_WG: session 6's ss and every A-in-registers kernel (the
# defaults, rs256o / rs256ps, are the auto / bf16 rows; elsewhere the variant's plan, run once).
FORCED += [(f"{v}:QSA_SCORES_WG={k}", v, {"QSA_SCORES_WG": k})
           for v, ks in (("auto", ("ss", "rs128", "rs128p", "rs256", "rs128s", "rs256s", "rs256o")),
                         ("bf16", ("ss", "rs128", "rs256", "rs256p", "rs128s", "rs256ps", "rs256o")))
           for k in ks]
CHECK_SHAPES = [((3, 5, 70), 1), ((5, 48, 129), 2), ((2, 200, 300), 3), ((1, 64, 1000), 4),
                ((37, 64, 1000), 5), ((256, 64, 4096), 6), ((1, 64, 262144), 8)]
BENCH_SHAPES = [(256, 64, 4096), (256, 64, 2048), (1, 64, 262144), (2, 64, 262144),
                (4, 64, 262144)]


def plans_for(planner, shape):
    """[(variant, plan)] for one shape, one per distinct dispatched kernel; a variant the
    target lacks (e.g. bf16 below sm_80) is reported and left out."""
    nq, heads, blocks = shape
    out, seen = [], set()
    runs = [(v, v, None) for v in VARIANTS] + FORCED
    for label, v, switches in runs:
        try:
            p = planner.plan("scores", dict(nq=nq, heads=heads, blocks=blocks), v, switches)
        except qsa_plan.PlanError as e:
            print(f"# variant {label} on {nq}x{heads}x{blocks}: {e}", file=sys.stderr)
            continue
        # The same launch (a forced tile the dispatch already takes, a decode switch on a
        # shape the decode kernels do not run) runs once.
        last = p["call"][-1] if p.get("call") else {}
        key = (p["dispatched"],) + tuple(str(last.get(f)) for f in
                                         ("kernel", "grid", "block", "shared_bytes", "args"))
        if key not in seen:
            seen.add(key)
            out.append((label, p))
    return out


def planned(planner, check=True, bench=True):
    """(label, plan) of every call this bench launches."""
    shapes = ([s for s, _ in CHECK_SHAPES] if check else []) + (BENCH_SHAPES if bench else [])
    for shape in shapes:
        for v, p in plans_for(planner, shape):
            yield f"{'x'.join(map(str, shape))} {v}", p


class Scorer:
    def __init__(self, planner, kernels):
        self.planner = planner
        self.launcher = qsa_plan.CupyLauncher(kernels)

    def launcher_of(self, plan, q, kb, w, s):
        """A closure that launches the plan once (buffers bound once, outside timing)."""
        call = qsa_plan.Call(plan, self.launcher, bind={"q": q, "kb": kb, "w": w, "s": s},
                             alloc=qsa_plan.torch_alloc)
        call.setup()
        return call


def make_inputs(nq, heads, blocks, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(nq, heads, HEAD_DIM, device="cuda", generator=g)
    kb = torch.randn(blocks, HEAD_DIM, device="cuda", generator=g)
    w = torch.rand(nq, heads, device="cuda", generator=g)
    return q, kb, w


def reference_f64(q, kb, w):
    """FP64 reference on the GPU (products of f32 values are exact in f64)."""
    d = torch.einsum("qhd,bd->qhb", q.double(), kb.double())
    return (w.double()[:, :, None] * torch.relu(d)).sum(1)


def torch_scores(q, kb, w):
    return (w[:, :, None] * torch.relu(torch.einsum("qhd,bd->qhb", q, kb))).sum(1)


def emulate_order(q, kb, w, kind):
    """numpy emulation of the warp / SIMT summation orders (what the CPU backend does).
    fmaf(a, b, c) = f32(f64(a) * f64(b) + f64(c)): the product is exact in f64; the one
    f64 rounding of the sum can differ from a single f32 rounding only in rare ties."""
    f32 = np.float32
    Q = q.cpu().numpy().astype(np.float64)  # [nq, h, d]
    K = kb.cpu().numpy().astype(np.float64)  # [b, d]
    W = w.cpu().numpy().astype(np.float64)
    nq, heads, _ = Q.shape
    blocks = K.shape[0]
    out = np.zeros((nq, blocks), dtype=f32)
    for h in range(heads):
        qh = Q[:, h, :]  # [nq, d]
        if kind == "warp":
            ql = qh.reshape(nq, 32, 4)
            kl = K.reshape(blocks, 32, 4)
            p = (ql[:, None, :, 0] * kl[None, :, :, 0]).astype(f32)  # [nq, b, 32]
            for j in range(1, 4):
                p = (ql[:, None, :, j] * kl[None, :, :, j] + p.astype(np.float64)).astype(f32)
            for o in (16, 8, 4, 2, 1):
                idx = np.arange(32) ^ o
                p = (p.astype(np.float64) + p[:, :, idx].astype(np.float64)).astype(f32)
            dot = p[:, :, 0]
        else:
            dot = np.zeros((nq, blocks), dtype=f32)
            for d in range(HEAD_DIM):
                dot = (qh[:, None, d] * K[None, :, d] + dot.astype(np.float64)).astype(f32)
        r = np.maximum(dot, f32(0)).astype(np.float64)
        out = (W[:, h, None] * r + out.astype(np.float64)).astype(f32)
    return out


def errors(s, ref):
    e = s.double() - ref
    return math.sqrt(float((e * e).mean())), float(e.abs().max())


def check(sc, shapes, log):
    log("## FP64 error per kernel (RMSE / max abs; ratio = max(rmse, max) ratio to the warp kernel)\n")
    log("| shape nq x heads x blocks | kernel | RMSE | max abs | RMSE / warp | max / warp | scale max|S| |")
    log("|---|---|---|---|---|---|---|")
    ok = True
    for (nq, heads, blocks), seed in shapes:
        q, kb, w = make_inputs(nq, heads, blocks, seed)
        ref = reference_f64(q, kb, w)
        base = None
        rmse_of = {}  # dispatched kernel -> RMSE, for the wgmma / mma.sync comparison
        plans = plans_for(sc.planner, (nq, heads, blocks))
        for v, plan in plans:
            k = plan["dispatched"]
            kern = plan["call"][-1].get("kernel", "") if plan.get("call") else ""
            if "_wgrs" in kern:  # the RS wgmma kernels share the engine's label: name each
                k = f"{k}/{kern.rsplit('_', 1)[-1]}"  # e.g. tf32_wgmma/wgrs256s
            elif "_decode_wg" in kern and ":" in v:  # forced ring / grid forms: grid, bytes
                last = plan["call"][-1]
                k = f"{k}/grid{last['grid'][0]}/{last['shared_bytes']}B"
            s = torch.full((nq, blocks), float("nan"), device="cuda")
            sc.launcher_of(plan, q, kb, w, s)()
            torch.cuda.synchronize()
            if torch.isnan(s).any():
                log(f"| {nq}x{heads}x{blocks} | {k} | NaN in output (unwritten cells) | | | | |")
                ok = False
                continue
            rmse, mx = errors(s, ref)
            if k == "warp":
                base = (rmse, mx)
            r1 = rmse / base[0] if base and base[0] > 0 else float("nan")
            r2 = mx / base[1] if base and base[1] > 0 else float("nan")
            log(f"| {nq}x{heads}x{blocks} | {k} | {rmse:.3e} | {mx:.3e} | {r1:.2f} | {r2:.2f} | "
                f"{float(ref.abs().max()):.1f} |")
            if k == "simt" and (r1 > 4 or r2 > 4):
                ok = False
            rmse_of[k] = rmse
        # A wgmma kernel rounds its inputs as its mma.sync twin does (tf32: cvt.rna, bf16:
        # cvt.rn) and differs only in summation order, so its RMSE must stay near the twin's;
        # a descriptor / fragment layout error gives O(1) errors. 2x is far above order noise
        # (emulated scores_ragged: tf32_wgmma 2.38039e-4 vs tf32 2.38045e-4, 2026-12-02).
        # The wgmma decode kernels (tf32_decode_wg) against the mma.sync ones (tf32_decode).
        for k, r in rmse_of.items():
            engine = k.split("/")[0]
            twin = (engine[: -len("_wgmma")] if engine.endswith("_wgmma")
                    else engine.rsplit("_", 1)[0]
                    if engine.endswith(("_decode_wg", "_decode_wgc", "_decode_wgc2", "_decode_tma",
                                        "_decode_tma2")) else None)
            if twin in rmse_of and r > 2 * rmse_of[twin]:
                log(f"| {nq}x{heads}x{blocks} | {k} | RMSE {r:.3e} > 2x {twin}'s {rmse_of[twin]:.3e}: FAIL | | | | |")
                ok = False
        # Bit-exact order check on small shapes.
        if nq * heads * blocks <= 64 * 1024:
            for v, plan in plans:
                k = kind = plan["dispatched"]
                if kind not in ("warp", "simt"):
                    continue
                s = torch.empty((nq, blocks), device="cuda")
                sc.launcher_of(plan, q, kb, w, s)()
                torch.cuda.synchronize()
                em = emulate_order(q, kb, w, kind)
                got = s.cpu().numpy()
                diff = int((got.view(np.uint32) != em.view(np.uint32)).sum())
                log(f"| {nq}x{heads}x{blocks} | {k} vs emulated order | bits differ in {diff} of {got.size} | | | | |")
                if diff:
                    ok = False
    log("")
    return ok


def replays(fn, reps, inner):
    """Per-call times (s) of `reps` batches of `inner` back-to-back calls, in launch order."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e-3 / inner)
    return out


def time_it(fn, reps, inner=10):
    """Median (min, max) over `reps` batches of the per-call time of `inner` back-to-back
    calls between two CUDA events: batching keeps the host's launch cost off the GPU clock."""
    ts = sorted(replays(fn, reps, inner))
    return ts[len(ts) // 2], ts[0], ts[-1]


def bench(sc, shapes, log):
    dev = torch.cuda.get_device_name()
    log(f"## Timings: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, {dev}, "
        f"torch {torch.__version__}, cupy {cp.__version__}; median of reps after warm-up, CUDA events\n")
    log("| shape nq x heads x blocks | implementation | median us | min..max us | TFLOP/s | GB/s | vs torch FP32 unfused | vs torch TF32 unfused | fraction of limit |")
    log("|---|---|---|---|---|---|---|---|---|")
    for nq, heads, blocks in shapes:
        q, kb, w = make_inputs(nq, heads, blocks, 7)
        flop = 2.0 * nq * heads * blocks * HEAD_DIM
        nbytes = 4.0 * (blocks * HEAD_DIM + nq * heads * HEAD_DIM + nq * heads + nq * blocks)
        decode = nq * heads <= 256  # Kb-bound: judged against HBM
        s = torch.empty((nq, blocks), device="cuda")
        rows = []
        reps = 10

        def tr(tf32):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            return lambda: torch_scores(q, kb, w)
        rows.append(("torch unfused FP32", time_it(tr(False), reps), "fp32"))
        rows.append(("torch unfused TF32", time_it(tr(True), reps), "tf32"))
        q2, kbt = q.view(-1, HEAD_DIM), kb.t()
        torch.backends.cuda.matmul.allow_tf32 = False
        rows.append(("torch GEMM alone FP32", time_it(lambda: torch.mm(q2, kbt), reps), "fp32"))
        torch.backends.cuda.matmul.allow_tf32 = True
        rows.append(("torch GEMM alone TF32", time_it(lambda: torch.mm(q2, kbt), reps), "tf32"))
        qb, kbb = q2.bfloat16(), kbt.bfloat16()
        rows.append(("torch GEMM alone BF16 (pre-converted)", time_it(lambda: torch.mm(qb, kbb), reps), "bf16"))
        torch.backends.cuda.matmul.allow_tf32 = False
        for v, plan in plans_for(sc.planner, (nq, heads, blocks)):
            k = plan["dispatched"]
            kind = "bf16" if "bf16" in k else "tf32" if "tf32" in k else "fp32"
            r = reps if k != "warp" else max(5, reps // 4)
            rows.append((f"qsa {k} ({v})", time_it(sc.launcher_of(plan, q, kb, w, s), r), kind))
        t_fp32 = rows[0][1][0]
        t_tf32 = rows[1][1][0]
        for name, (med, lo, hi), kind in rows:
            tf = flop / med / 1e12
            gbs = nbytes / med / 1e9
            if decode:
                frac = f"{nbytes / med / PEAK['hbm']:.0%} of HBM 4.3 TB/s"
            else:
                frac = f"{flop / med / PEAK[kind]:.0%} of {kind.upper()} {PEAK[kind] / 1e12:.0f} TF"
            log(f"| {nq}x{heads}x{blocks} | {name} | {med * 1e6:.1f} | {lo * 1e6:.1f}..{hi * 1e6:.1f} | "
                f"{tf:.1f} | {gbs:.0f} | {t_fp32 / med:.2f}x | {t_tf32 / med:.2f}x | {frac} |")
        del q, kb, w, s
        torch.cuda.empty_cache()
    log("")


# --stability: the BF16 / TF32 wide-tile wgmma kernels whose replays spread 2-3x in session 7's
# call F1 (rs256p / rs256 / rs128: 48.7-146.2 us) while rs256ps / rs256o stayed tight.
STABILITY_ROWS = [(f"{v}:QSA_SCORES_WG={k}", v, {"QSA_SCORES_WG": k})
                  for v, ks in (("bf16", ("rs256p", "rs256", "rs128", "rs256ps", "rs256o")),
                                ("auto", ("rs256", "rs256o")))
                  for k in ks]


def stability(sc, shape, rounds, reps, inner, log):
    """Is a kernel's replay spread its own or the machine's? Every kernel of STABILITY_ROWS and
    cuBLAS's BF16 GEMM alone (the control) are timed in `rounds` rounds, the order reversed
    every other round, `reps` replays of `inner` calls each; per kernel: each round's median,
    then over all replays p10 / p50 / p90 / max and how many exceed 1.25x its fastest. A spread
    the control shares, or that moves with the position in the round, is the machine's; one
    that stays with a kernel in every round and either order is the kernel's. With --inner 1
    a bimodal kernel (replays at 1x and 2x / 3x its fastest) points at CTAs that did not all
    fit one wave, a smeared one at clocks."""
    nq, heads, blocks = shape
    q, kb, w = make_inputs(nq, heads, blocks, 7)
    s = torch.empty((nq, blocks), device="cuda")
    rows = []
    for label, v, sw in STABILITY_ROWS:
        p = sc.planner.plan("scores", dict(nq=nq, heads=heads, blocks=blocks), v, sw)
        kern = p["call"][-1]["kernel"]
        rows.append((f"{kern} ({label})", sc.launcher_of(p, q, kb, w, s)))
    qb, kbb = q.view(-1, HEAD_DIM).bfloat16(), kb.t().bfloat16()
    rows.append(("cuBLAS BF16 GEMM alone (control)", lambda: torch.mm(qb, kbb)))
    times = {name: [] for name, _ in rows}
    medians = {name: [] for name, _ in rows}
    for r in range(rounds):
        order = rows if r % 2 == 0 else rows[::-1]
        for pos, (name, fn) in enumerate(order):
            ts = replays(fn, reps, inner)
            times[name] += ts
            medians[name].append((sorted(ts)[len(ts) // 2], pos))
    log(f"## Replay stability at {nq}x{heads}x{blocks}: {rounds} rounds (order reversed every other), "
        f"{reps} replays of {inner} call(s); {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, "
        f"{torch.cuda.get_device_name()}\n")
    log("| kernel | median us per round (position) | p10 | p50 | p90 | max | replays > 1.25x fastest |")
    log("|---|---|---|---|---|---|---|")
    for name, _ in rows:
        ts = sorted(times[name])
        pick = lambda f: ts[min(len(ts) - 1, int(f * len(ts)))] * 1e6
        slow = sum(1 for t in ts if t > 1.25 * ts[0])
        per_round = ", ".join(f"{m * 1e6:.1f} ({pos})" for m, pos in medians[name])
        log(f"| {name} | {per_round} | {pick(0.1):.1f} | {pick(0.5):.1f} | {pick(0.9):.1f} | "
            f"{ts[-1] * 1e6:.1f} | {slow} of {len(ts)} |")
    log("")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="build/kernels/sm_90",
                    help="folder of the target's code objects (block_scores.cubin), default %(default)s")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--shapes", default="",
                    help="comma-separated nq x heads x blocks (e.g. 1x64x262144): check and bench only these "
                         "of CHECK_SHAPES / BENCH_SHAPES (default: all)")
    ap.add_argument("--stability", action="store_true",
                    help="only the replay-stability sweep of the wide wgmma kernels (STABILITY_ROWS)")
    ap.add_argument("--stability-shape", default="256x64x4096", help="nq x heads x blocks (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=4, help="stability rounds (default %(default)s)")
    ap.add_argument("--reps", type=int, default=30, help="stability replays per kernel and round (default %(default)s)")
    ap.add_argument("--inner", type=int, default=10, help="calls per stability replay (default %(default)s)")
    qsa_plan.add_plan_args(ap)
    a = ap.parse_args()
    if a.shapes:
        keep = set(a.shapes.split(","))
        global CHECK_SHAPES, BENCH_SHAPES
        known = sorted({"x".join(map(str, sh)) for sh, _ in CHECK_SHAPES} |
                       {"x".join(map(str, sh)) for sh in BENCH_SHAPES})
        CHECK_SHAPES = [(sh, seed) for sh, seed in CHECK_SHAPES if "x".join(map(str, sh)) in keep]
        BENCH_SHAPES = [sh for sh in BENCH_SHAPES if "x".join(map(str, sh)) in keep]
        if not CHECK_SHAPES and not BENCH_SHAPES:
            sys.exit(f"--shapes {a.shapes}: none of the check or bench shapes; they are {', '.join(known)}")
    planner = qsa_plan.Planner(a.qsa, a.target, a.matrix)
    if a.plan_only:
        sys.exit(qsa_plan.plan_only(planned(planner, not a.skip_check, not a.skip_bench), sys.stdout))
    global cp, torch
    import cupy as cp
    import torch

    os.makedirs(a.out, exist_ok=True)
    lines = []

    def log(x):
        print(x, flush=True)
        lines.append(x)

    sc = Scorer(planner, a.kernels)
    qsa_plan.check_device(planner.plan("scores", dict(nq=1, heads=1, blocks=1)), log)
    ok = True
    if a.stability:
        shape = tuple(int(x) for x in a.stability_shape.split("x"))
        stability(sc, shape, a.rounds, a.reps, a.inner, log)
        with open(os.path.join(a.out, f"scores_stability_inner{a.inner}.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return
    if not a.skip_check:
        ok = check(sc, CHECK_SHAPES, log)
    if not a.skip_bench:
        bench(sc, BENCH_SHAPES, log)
    with open(os.path.join(a.out, "scores_vs_torch.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("CHECK", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

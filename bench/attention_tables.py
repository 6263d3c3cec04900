"""bench/attention_vs_torch.py's two tables: --check (every variant's errors against FP64, gated
as the runner gates them) and --bench (qsa's kernels, their sweeps, torch and fla, timed on
the same inputs), as Markdown rows; every launch is a plan of `qsa plan` (attention_plans).
"""
import math
import re

import torch

from attention_peers import fla_prefill, torch_index, torch_sel_attn
import attention_plans
from attention_plans import (BLK, BWD_VARIANTS, CHECK_CASES, CHECK_DECODE, CHECK_DECODE_HND, CHECK_VARIANTS, D, DECODE,
                             DECODE_FORCED,
                             DECODE_ITEMS, PREFILL, STAGED, bench_shape, dec_note, dec_sweep, fwd_sweeps, is_decode,
                             is_kv_pass, is_probe, hnd_sweep, shape_of, staged_note, sweep)
from attention_problem import decode_problem, err, hnd_of, make_problem, reference
from attention_timing import time_graph, time_ms


def mma_limit(matrix_path):
    """The error suite's limit for tensor-core attention: matrix.yaml's
    gates.error_limits.attention.mma.limit, the rule the runner judges these kernels by (relative
    max error = max |error| / max |FP64 value|; src/suites/error.rs)."""
    text = open(matrix_path).read()
    at = text.find("error_limits:")
    at = text.find("attention:", at) if at >= 0 else -1
    m = re.compile(r"mma: \{floor: [^,]+, limit: ([0-9.eE+-]+)\}").search(text, at) if at >= 0 else None
    if m is None:
        raise SystemExit(f"{matrix_path}: no gates.error_limits.attention.mma limit (the check's gate for "
                         "tensor-core rows); pass the checkout's matrix.yaml with --matrix")
    return float(m.group(1))


def run_check(qsa, out, limit):
    """Every row's o / lse / dq / dk / dv against FP64. Gate: the gather baseline near FP64; every
    other row (the staged, ring and KV-block-major kernels: tensor cores on sm_80+) by the runner's
    rule for its class, relative max error <= `limit` (mma_limit). The staged/gather ratios are
    printed for reading, not gated: the bf16-product kernels sit 5-20x over the FP32 gather by
    design (2^-16 per product) and well under the limit."""
    lines = ["| case | dtype | variant | o max / rms | lse max | dq max / rms | dk max / rms | dv max / rms | "
             "staged/gather (max o, dq, dk, dv) | gate |", "|---|---|---|---|---|---|---|---|---|---|"]
    ok_all = True
    for ci, (name, B, Tq, Tk, hq, hkv, t, dt) in enumerate(CHECK_CASES):
        P = make_problem(B, Tq, Tk, hq, hkv, t, dt, seed=100 + ci)
        # Rows with no block at all: the whole list -1 for one token, and one all-invisible.
        P["ids"][0, 0] = -1
        if Tq > 2:
            P["ids"][0, 1, :, 0] = (Tk + 63) // 64 + 5
            P["ids"][0, 1, :, 1:] = -1
        # Repeats: the same id in several slots.
        P["ids"][..., -1] = P["ids"][..., 0]
        R = reference(P)
        rows = B * Tq * hq
        shape = shape_of(P)
        res = {}
        dk = torch.empty(P["k"].numel(), device="cuda")
        dv = torch.empty(P["v"].numel(), device="cuda")
        for vname, variant, kw in CHECK_VARIANTS:
            # The backward's setup runs the forward (with the same switches) into o / lse.
            o = torch.full((rows * D,), float("nan"), device="cuda")
            lse = torch.full((rows,), float("nan"), device="cuda")
            dq = torch.full((rows * D,), float("nan"), device="cuda")
            call = qsa.bwd(P, o, lse, dq, dk, dv, qsa.plan(shape, True, variant, **kw))
            call.setup()
            call()
            torch.cuda.synchronize()
            res[vname] = {n: err(x, R[n]) for n, x in (("o", o), ("lse", lse), ("dq", dq), ("dk", dk),
                                                       ("dv", dv))}
        floor = 1e-6
        scale = {n: max(R[n][torch.isfinite(R[n])].abs().max().item(), 0.0) if torch.isfinite(R[n]).any() else 0.0
                 for n in ("o", "lse", "dq", "dk", "dv")}
        for vname, r in res.items():
            ratios, gate = [], True
            for n in ("o", "dq", "dk", "dv"):
                gm = res["gather"][n][0]
                ratios.append(r[n][0] / gm if gm > 0 else float("inf") if r[n][0] > 0 else 1.0)
            for n in ("o", "lse", "dq", "dk", "dv"):
                if r[n][0] > limit * scale[n]:
                    gate = False
            for n in ("o", "lse", "dq", "dk", "dv"):
                if not r[n][2] or not math.isfinite(r[n][0]):
                    gate = False
            if vname == "gather":  # the baseline's own sanity: near the FP64 reference
                gate = all(r[n][0] < 5e-3 * max(1.0, R[n].abs().max().item()) and r[n][2]
                           for n in ("o", "lse", "dq", "dk", "dv"))
            ok_all &= gate
            f = lambda n: f"{r[n][0]:.2e} / {r[n][1]:.2e}"
            lines.append(f"| {name} | {dt} | {vname} | {f('o')} | {r['lse'][0]:.2e} | {f('dq')} | {f('dk')} | "
                         f"{f('dv')} | {', '.join(f'{x:.2f}' for x in ratios)} | {'pass' if gate else 'FAIL'} |")
        # The decode forward (forced on this shape where built): o and lse, same gate; then on
        # the head-major twin of P against the same reference.
        Ph = hnd_of(P)
        for vname, sw, shp, PP in [(n, w, shape, P) for n, w in CHECK_DECODE] + \
                [(n, w, dict(shape, kv_layout="hnd"), Ph) for n, w in CHECK_DECODE_HND]:
            plan = qsa.plan(shp, sw=sw)
            if not is_decode(plan):
                continue
            o = torch.full((rows * D,), float("nan"), device="cuda")
            lse = torch.full((rows,), float("nan"), device="cuda")
            call = qsa.fwd(PP, o, lse, plan)
            call.setup()
            call()
            call()  # twice: the in-kernel merge's tickets must be reset by the first call
            torch.cuda.synchronize()
            eo, el = err(o, R["o"]), err(lse, R["lse"])
            gm = res["gather"]["o"][0]
            gate = eo[0] <= 4 * gm + floor and eo[2] and el[2] and math.isfinite(eo[0])
            ok_all &= gate
            lines.append(f"| {name} | {dt} | {vname} fwd ({dec_note(plan)}) | {eo[0]:.2e} / {eo[1]:.2e} | "
                         f"{el[0]:.2e} | - | - | - | {eo[0] / gm if gm > 0 else 1.0:.2f} | "
                         f"{'pass' if gate else 'FAIL'} |")
            del call
        del P, Ph, R
    text = "\n".join(lines)
    print(text)
    return text, ok_all


def hnd_bench(qsa, P, shape, o, o_t, case, G, add):
    """DEC_HND's rows on the head-major twin of P (torch gather+sdpa on that layout first), each
    non-probe row checked against the NHD torch output `o_t` (same values: the layouts agree)."""
    Ph = hnd_of(P)
    idx, mask = torch_index(Ph)
    th = time_graph(lambda: torch_sel_attn(Ph, idx, mask))
    d = (torch_sel_attn(Ph, idx, mask).reshape(-1).float() - o_t).abs().max().item()
    add(case, G, "torch gather+sdpa, hnd", th, note=f"K/V [B, H, Tk, D]; |o - torch nhd| {d:.1e}")
    for label, p in hnd_sweep(qsa, shape):
        c = qsa.fwd(Ph, o, o.new_empty(o.numel() // D), p)
        c.setup()
        tm = time_graph(c)
        if is_probe(label):
            add(case, G, f"qsa decode fwd {label}", tm, th[0],
                note=f"{dec_note(p)}; ablation: output not the attention, not checked")
        else:
            o.fill_(float("nan"))
            c()
            d = (o - o_t).abs().max().item()
            add(case, G, f"qsa decode fwd {label}", tm, th[0], note=f"{dec_note(p)}; |o - torch nhd| {d:.1e}")
        if label == "hnd (auto)":
            add(case, G, "qsa decode fwd hnd (auto), L2 cold", time_graph(c, cold=True),
                note="256 MB write before each call, its time subtracted")
        del c
    del Ph, idx, mask


def run_bench(qsa, out, fla, decode=True, decode_only=False, fwd_sweep="all"):
    rows_md = ["| case | GQA group | kernel | median ms | min ms | max ms | vs torch | vs fla | note |",
               "|---|---|---|---|---|---|---|---|---|"]
    hbm_ceiling = 4.3e12

    def add(case, group, kernel, tm, torch_ms=None, fla_ms=None, note=""):
        med, lo, hi = tm
        vt = f"{torch_ms / med:.2f}x" if torch_ms else "-"
        vf = f"{med / fla_ms:.2f} of fla" if fla_ms else "-"
        rows_md.append(f"| {case} | {group} | {kernel} | {med:.4f} | {lo:.4f} | {hi:.4f} | {vt} | {vf} | {note} |")
        print(rows_md[-1], flush=True)

    kv_cache = {}
    for case, B, Tq, Tk, hq, hkv in (DECODE if decode else []):
        G = hq // hkv
        key = (B, Tk, hkv)
        P = decode_problem(B, Tq, Tk, hq, hkv)
        if key in kv_cache:
            P["k"], P["v"] = kv_cache[key]
        else:
            kv_cache[key] = (P["k"], P["v"])
        rows = B * Tq * hq
        o = torch.empty(rows * D, device="cuda")
        lse = torch.empty(rows, device="cuda")
        shape = bench_shape(B, Tq, Tk, hq, hkv)
        plan = qsa.plan(shape)  # auto: the decode kernel where built, else staged
        auto_name = plan["dispatched"]
        auto_note = dec_note(plan) if is_decode(plan) else staged_note(plan)
        staged = qsa.fwd(P, o, lse, plan)
        staged.setup()
        gather = qsa.fwd(P, o, lse, qsa.plan(shape, variant="gather"))
        gather.setup()
        idx, mask = torch_index(P)
        tt = time_graph(lambda: torch_sel_attn(P, idx, mask))
        o_t = torch_sel_attn(P, idx, mask).reshape(-1).float()
        add(case, G, "torch gather+sdpa", tt, note="index and mask precomputed; CUDA graph")
        tg = time_graph(gather)
        add(case, G, "qsa gather fwd", tg, tt[0])
        ts = time_graph(staged)
        staged()
        by = Tq * hkv * 16 * BLK * D * 2 * 2
        add(case, G, f"qsa {auto_name} fwd (auto)", ts, tt[0],
            note=f"{auto_note}; K/V {by / 1e6:.0f} MB = "
                 f"{by / hbm_ceiling * 1e3:.4f} ms at 4.3 TB/s; |o - torch| {(o - o_t).abs().max().item():.1e}")
        tc = time_graph(staged, cold=True)
        add(case, G, f"qsa {auto_name} fwd, L2 cold", tc, note="256 MB write before each call, its time subtracted")
        tcg = time_graph(lambda: torch_sel_attn(P, idx, mask), cold=True)
        add(case, G, "torch gather+sdpa, L2 cold", tcg)
        splan = qsa.plan(shape, sw=STAGED)
        if splan["call"] != plan["call"]:
            c = qsa.fwd(P, o, lse, splan)
            c.setup()
            add(case, G, "qsa staged fwd (forced)", time_graph(c), tt[0], note=staged_note(splan))
            del c
        # The decode kernel's sweep (warps x ring stages, splits x merge), each checked
        # against torch after its timing.
        if is_decode(plan):
            for label, p in dec_sweep(qsa, shape, plan):
                c = qsa.fwd(P, o, lse, p)
                c.setup()
                tm = time_graph(c)
                if is_probe(label):
                    add(case, G, f"qsa decode fwd {label}", tm, tt[0],
                        note=f"{dec_note(p)}; ablation: output not the attention, not checked")
                    del c
                    continue
                o.fill_(float("nan"))
                c()
                d = (o - o_t).abs().max().item()
                add(case, G, f"qsa decode fwd {label}", tm, tt[0], note=f"{dec_note(p)}; |o - torch| {d:.1e}")
                del c
            hnd_bench(qsa, P, shape, o, o_t, case, G, add)
        # Staging depth and split sweep: decode is latency / occupancy bound, and the best
        # split moves with the per-block cost (tensor cores vs FP32).
        for label, p in ([] if decode_only else sweep(qsa, shape, splan)):
            c = qsa.fwd(P, o, lse, p)
            c.setup()
            add(case, G, f"qsa staged fwd {label}", time_graph(c), tt[0], note=staged_note(p))
            del c
        del P, idx, mask, staged, gather
    # Work items per SM: the decode kernel (forced) against the staged kernel (forced), both
    # outputs compared (|o_decode - o_staged|: the two kernels share no code).
    for case, B, Tq, Tk, hq, hkv in (DECODE_ITEMS if decode and attention_plans.DEC_SWEEP not in ("hnd", "dyn") else []):
        G = hq // hkv
        P = make_problem(B, Tq, Tk, hq, hkv, 16, "bf16", seed=11, ids_kind="distinct")
        key = (B, Tk, hkv)
        if key in kv_cache:
            P["k"], P["v"] = kv_cache[key]
        rows = B * Tq * hq
        o_d = torch.empty(rows * D, device="cuda")
        o_s = torch.empty(rows * D, device="cuda")
        lse = torch.empty(rows, device="cuda")
        shape = bench_shape(B, Tq, Tk, hq, hkv)
        pd, ps = qsa.plan(shape, sw=DECODE_FORCED), qsa.plan(shape, sw=STAGED)
        cd, cs = qsa.fwd(P, o_d, lse, pd), qsa.fwd(P, o_s, lse, ps)
        cd.setup()
        cs.setup()
        td, ts = time_graph(cd), time_graph(cs)
        cd()
        cs()
        d = (o_d - o_s).abs().max().item()
        items = B * Tq * hkv * ((G + 15) // 16)
        add(case, G, "qsa decode fwd (forced)", td, note=f"{dec_note(pd)}; {items} items; "
            f"{ts[0] / td[0]:.2f}x the staged kernel; |o - staged| {d:.1e}")
        add(case, G, "qsa staged fwd (forced)", ts, note=staged_note(ps))
        del P, cd, cs, o_d, o_s, lse
    kv_cache.clear()
    torch.cuda.empty_cache()
    if decode_only:
        return "\n".join(rows_md)

    # Prefill: B=4, T=16K, 64 q heads, 4 kv heads (group 16), 16 blocks.
    case = PREFILL[0]
    P = make_problem(4, 16384, 16384, 64, 4, 16, "bf16", seed=9, ids_kind="distinct")
    rows = 4 * 16384 * 64
    o = torch.empty(rows * D, device="cuda")
    lse = torch.empty(rows, device="cuda")
    dq = torch.empty(rows * D, device="cuda")
    dk = torch.empty(P["k"].numel(), device="cuda")
    dv = torch.empty(P["v"].numel(), device="cuda")
    fla_f = fla_b = fla_o = None
    if fla is not None:
        fla_f, fla_b, fla_o = fla_prefill(P, case, add, rows_md)
    shape = bench_shape(4, 16384, 16384, 64, 4)
    plan = qsa.plan(shape)
    staged = qsa.fwd(P, o, lse, plan)
    staged.setup()
    tf = time_ms(staged, warmup=2, reps=5)
    flop = 4 * 16384 * 64 * 16 * BLK * D * 4
    note = f"{staged_note(plan)}, {flop / tf[0] / 1e9:.0f} TFLOP/s"
    if fla_o is not None:
        note += f"; |o - fla| max {(o - fla_o).abs().max().item():.1e}"
    add(case, 16, "qsa staged fwd", tf, fla_ms=fla_f[0] if fla_f else None, note=note)
    o_default = o.clone()
    for label, p in fwd_sweeps(qsa, shape, plan, fwd_sweep):
        c = qsa.fwd(P, o, lse, p)
        c.setup()
        tm = time_ms(c, 1, 3)
        # Each variant's o against the default plan's, on the 67 M outputs the check rows cannot
        # afford in FP64 (the error suite's attn_prefill_16k checks 32 rows of it).
        add(case, 16, f"qsa staged fwd {label}", tm, fla_ms=fla_f[0] if fla_f else None,
            note=f"{staged_note(p)}, {flop / tm[0] / 1e9:.0f} TFLOP/s; |o - default o| max "
                 f"{(o - o_default).abs().max().item():.1e}")
        del c
    del o_default
    # The backward's setup runs the forward once into o / lse; the call runs the plan's steps
    # (what the runner times): the default path (choose_backward's) and each variant of
    # BWD_VARIANTS (a dK / dV path forced, the query-side pass double-buffered).
    for label, kw in BWD_VARIANTS:
        bplan = qsa.plan(shape, True, **kw)
        back = qsa.bwd(P, o, lse, dq, dk, dv, bplan)
        back.setup()
        tb = time_ms(back, warmup=1, reps=3)
        kernels = "+".join(s["kernel"].removeprefix("qsa_attn_") for s in bplan["call"] if "kernel" in s)
        zero = ", includes zeroing dk/dv" if any(s["op"] == "zero" for s in bplan["call"]) else ""
        add(case, 16, f"qsa staged bwd{label}", tb, fla_ms=fla_b[0] if fla_b else None,
            note=f"{kernels}: {staged_note(bplan)}{zero}, {2 * flop / tb[0] / 1e9:.0f} TFLOP/s")
        # The KV-block-major pass alone (same call's buffers, after a full call wrote drow):
        # the dQ pass's share of the total is the difference.
        kv_steps = [s for s in bplan["call"] if is_kv_pass(s.get("kernel", ""))]
        if kv_steps:
            tk = time_ms(lambda: back._run(kv_steps), warmup=1, reps=3)
            add(case, 16, f"qsa kv_bwd pass alone{label}", tk, fla_ms=fla_b[0] if fla_b else None,
                note=f"grid {kv_steps[0]['grid'][0]}, {kv_steps[0]['shared_bytes']} B shared")
        del back
    gather = qsa.fwd(P, o, lse, qsa.plan(shape, variant="gather"))
    gather.setup()
    tg = time_ms(gather, warmup=1, reps=3)
    add(case, 16, "qsa gather fwd", tg, fla_ms=fla_f[0] if fla_f else None)
    rows_md.append("")
    rows_md.append("torch on the prefill case is not run: gathering K/V per (token, kv head) is "
                   "4*16384*4*1024*128*2*2 B = 137 GB.")
    return "\n".join(rows_md)

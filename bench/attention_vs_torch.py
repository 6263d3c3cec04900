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
the decode kernel's QSA_ATTN_DEC_WARPS / _STAGES / _SPLITS / _MERGE /
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
import argparse
import datetime
import math
import os
import re
import sys

import qsa_plan

torch = None  # imported in main, after --plan-only (which needs no torch)

D, BLK = 128, 64  # head dim and KV block of the problem (the kernels' contract)


# ---- our kernels: plans of `qsa plan` (this script derives no launch rule) ------------------
SWEEP_NBUF = (1, 2)
SWEEP_SPLITS = (1, 2, 4, 6, 8, 12, 16, 32)
# The ring forward's sweep: (slot, stages, parts, CTA order, q, rescale); `head` walks one
# (batch, kv head)'s tokens first (QSA_ATTN_RING_ORDER), `token` is the staged kernel's order;
# q `shared` reads q's fragments from shared memory (QSA_ATTN_RING_Q; 128 registers: half 3 is
# four CTAs per SM on the H200, 56,848 B each); rescale `lazy` moves the running max only past a
# slack and skips O's rescale where no row moved (QSA_ATTN_RING_RESCALE); layout `swizzle`:
# 256-byte slot rows with XOR-swizzled 16-byte chunks and K's fragments by ldmatrix
# (QSA_ATTN_RING_LAYOUT, q in registers only); copy `warp`: each warp copies its own keys' rows
# and syncs with __syncwarp, no CTA barrier per slot (QSA_ATTN_RING_COPY, padded rows only).
SWEEP_RING = tuple(
    (slot, st, parts, order, qmem, rescale, "pad", "cta")
    for rescale, rows in (
        ("exact", (("block", 2, 3, "token", "reg"), ("block", 3, 3, "token", "reg"), ("half", 4, 3, "token", "reg"),
                   ("block", 2, 2, "token", "reg"), ("block", 2, 3, "head", "reg"), ("block", 3, 3, "head", "reg"),
                   ("half", 4, 3, "head", "reg"), ("half", 5, 3, "head", "reg"), ("half", 6, 3, "head", "reg"),
                   ("block", 2, 2, "head", "reg"), ("half", 4, 2, "head", "reg"), ("half", 3, 3, "token", "shared"),
                   ("half", 3, 3, "head", "shared"), ("half", 3, 2, "head", "shared"), ("half", 4, 3, "head", "shared"),
                   ("block", 2, 3, "head", "shared"))),
        ("lazy", (("block", 2, 3, "token", "reg"), ("block", 2, 3, "head", "reg"), ("block", 2, 2, "head", "reg"),
                  ("half", 4, 3, "head", "reg"), ("half", 3, 3, "token", "shared"), ("half", 3, 3, "head", "shared"),
                  ("half", 3, 2, "head", "shared"))))
    for slot, st, parts, order, qmem in rows) + tuple(
    (slot, st, parts, order, "reg", rescale, "swizzle", "cta")
    for slot, st, parts, order, rescale in (
        ("block", 2, 3, "token", "exact"), ("block", 2, 3, "head", "exact"), ("half", 4, 3, "head", "exact"),
        ("block", 2, 3, "token", "lazy"), ("block", 2, 3, "head", "lazy"), ("block", 2, 2, "head", "lazy"),
        ("half", 4, 3, "head", "lazy"))) + tuple(
    (slot, st, parts, order, qmem, rescale, "pad", "warp")
    for slot, st, parts, order, qmem, rescale in (
        ("block", 2, 3, "token", "reg", "exact"), ("block", 2, 3, "token", "reg", "lazy"),
        ("block", 2, 3, "head", "reg", "lazy"), ("block", 3, 3, "head", "reg", "lazy"),
        ("half", 4, 3, "head", "reg", "lazy"), ("half", 5, 3, "head", "reg", "lazy"),
        ("half", 3, 3, "head", "shared", "lazy"), ("half", 3, 3, "token", "shared", "exact"),
        ("block", 2, 2, "head", "reg", "lazy"), ("half", 3, 2, "head", "shared", "lazy")))
# The warp forward's sweep (kernels/common/attention_warp_fwd.h, QSA_ATTN_FWD=warp: one warp per
# (token, kv head), its own cp.async ring of K / V slots, no CTA barrier): (warps per CTA, keys per
# piece (64: 16 KB slots; 32: 8 KB, qsa_attn_warp_h_fwd_*), slots per warp, bf16 P's parts,
# rescale). Resident warps per H200 SM by shared memory (227 KiB, 1 KiB per CTA reserved):
# 64-key 1x2 six, 1x3 four, 1x4 three, 3x2 six, 7x2 seven; 32-key 1x4 six, 1x3 nine (220
# registers), 1x6 four, 7x4 seven.
SWEEP_WARP = ((1, 64, 2, 3, "lazy"), (1, 64, 3, 3, "lazy"), (1, 64, 4, 3, "lazy"), (3, 64, 2, 3, "lazy"),
              (7, 64, 2, 3, "lazy"), (1, 64, 2, 2, "lazy"), (1, 64, 2, 3, "exact"), (1, 32, 4, 3, "lazy"),
              (1, 32, 3, 3, "lazy"), (1, 32, 6, 3, "lazy"), (7, 32, 4, 3, "lazy"), (1, 32, 4, 2, "lazy"))


def warp_sw(warps, keys, stages, parts, rescale):
    return {"QSA_ATTN_WARP_WARPS": warps, "QSA_ATTN_WARP_KEYS": keys, "QSA_ATTN_WARP_STAGES": stages,
            "QSA_ATTN_WARP_PARTS": parts, "QSA_ATTN_WARP_RESCALE": rescale}


# The decode kernel's sweep, one factor group at a time around the dispatched plan: warps x ring
# stages at its splits, then splits x merge at its warps and stages (plans that do not fit the
# target's shared memory are refused by `qsa plan` and skipped).
DEC_WARPS_STAGES = [(w, st) for w in (2, 4, 8) for st in (2, 3, 4)]
DEC_SPLITS = (1, 2, 4, 8, 16)
DEC_MERGES = ("kernel", "launch")
# sm_90's cluster merge: eight splits per item (the kernel's cluster size), over warps.
DEC_CLUSTER = [{"QSA_ATTN_DEC_MERGE": "cluster", "QSA_ATTN_DEC_WARPS": w} for w in (2, 4, 8)]
# Two 16-key units per softmax step (bf16), over warps x stages and with the cluster merge.
DEC_PAIR = [{"QSA_ATTN_DEC_PAIR": 1, "QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_STAGES": st}
            for w, st in ((4, 2), (4, 4), (8, 2))] + \
           [{"QSA_ATTN_DEC_PAIR": 1, "QSA_ATTN_DEC_MERGE": "cluster", "QSA_ATTN_DEC_WARPS": 8}]
# Fewer warps per CTA, more CTAs per item: the one-unit bf16 kernel's 166 registers (sm_90) fit
# three 4-warp or six 2-warp CTAs per SM (12 warps, where one 8-warp CTA gives 8), so 16 q x 8
# KV heads (128 items) at 3 splits of 4 warps (or 6 of 2) keeps 12 warps on every SM; one query
# (8 items) at 16 splits of 4 warps: 128 CTAs with one unit per warp, a 4-warp CTA merge.
DEC_WARPS_SPLITS = [{"QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_SPLITS": n, "QSA_ATTN_DEC_MERGE": m}
                    for w, n, m in ((4, 2, "kernel"), (4, 3, "kernel"), (4, 3, "launch"), (2, 4, "kernel"),
                                    (2, 6, "kernel"), (4, 16, "kernel"), (4, 16, "launch"))]
# Ablations (QSA_ATTN_DEC_PROBE; the output of a probe is NOT the attention, so its rows are not
# checked): the launch alone, the kernel without its K/V copies, the copies without the math; at
# the dispatched plan, and the copies alone with deeper rings (is the K/V traffic itself the bound?).
DEC_PROBES = [{"QSA_ATTN_DEC_PROBE": p} for p in ("launch", "no_kv", "no_math", "list", "loop")] + \
             [{"QSA_ATTN_DEC_PROBE": "no_math", "QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_STAGES": st}
              for w, st in ((4, 4), (8, 3))]
# Session 8 (issue 13): the chain probes above (list: launch + ids / q loads + the unit list;
# loop: everything but the merges), the cluster kernel's push merge (remote stores into the
# merging ranks' inboxes, one cluster barrier, no remote loads), the copies' 256-byte L2
# prefetch (is the 16-query K/V floor the DRAM's access pattern?), alone and on the copy floor;
# the warps' units round-robin (the CTA streams neighbouring units together) and 2-4 units of
# L2 look-ahead beyond the ring (more bytes in flight than shared memory holds).
DEC_NEW = [{"QSA_ATTN_DEC_MERGE": "push"}, {"QSA_ATTN_DEC_MERGE": "push", "QSA_ATTN_DEC_WARPS": 4},
           {"QSA_ATTN_DEC_MERGE": "cluster", "QSA_ATTN_DEC_WARPS": 4},
           {"QSA_ATTN_DEC_MERGE": "push", "QSA_ATTN_DEC_PROBE": "no_kv"},
           {"QSA_ATTN_DEC_PREFETCH": 256},
           {"QSA_ATTN_DEC_PREFETCH": 256, "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 4},
           {"QSA_ATTN_DEC_PREFETCH": 256, "QSA_ATTN_DEC_PROBE": "no_math"},
           {"QSA_ATTN_DEC_ORDER": "interleave"},
           {"QSA_ATTN_DEC_AHEAD": 2}, {"QSA_ATTN_DEC_AHEAD": 4},
           {"QSA_ATTN_DEC_AHEAD": 4, "QSA_ATTN_DEC_PROBE": "no_math"},
           {"QSA_ATTN_DEC_AHEAD": 4, "QSA_ATTN_DEC_ORDER": "interleave", "QSA_ATTN_DEC_PREFETCH": 256}]
# --decode-sweep new: only the probes and DEC_NEW (the earlier sweeps were measured in session 7).
DEC_SWEEP = "all"
# The decode kernel against the staged kernel as work items per SM grow (group 16, 8 KV heads,
# 262K; 8 items per query token): where the dispatch's MAX_ITEMS_PER_SM should switch.
DECODE_ITEMS = [(f"decode {tq} q x 8 kv heads, 262K", 1, tq, 262144, 128, 8) for tq in (32, 64, 128, 256)]


def shape_of(P):
    return dict(batch=P["batch"], q_len=P["q_len"], kv_len=P["kv_len"], hq=P["hq"], hkv=P["hkv"],
                t=P["t"], dtype=P["dtype"], scale=repr(float(P["scale"])))


class Qsa:
    def __init__(self, planner, launcher):
        self.planner = planner
        self.launcher = launcher

    def plan(self, shape, backward=False, variant="auto", nbuf=None, nsplit=None, bwd=None, fwd=None,
             stages=None, slot=None, parts=None, order=None, qmem=None, rescale=None, layout=None, copy=None,
             sw=None):
        sw = dict(sw or {})
        if fwd is not None:
            sw["QSA_ATTN_FWD"] = fwd  # staged | ring: the forward's kernel
        if stages is not None:
            sw["QSA_ATTN_STAGES"] = stages  # the ring forward's slots
        if slot is not None:
            sw["QSA_ATTN_RING_SLOT"] = slot  # block | half: a slot holds K and V, or K or V
        if parts is not None:
            sw["QSA_ATTN_RING_PARTS"] = parts  # 2 | 3: bf16 P's parts in the ring's P.V
        if order is not None:
            sw["QSA_ATTN_RING_ORDER"] = order  # token | head: the ring's CTA order
        if qmem is not None:
            sw["QSA_ATTN_RING_Q"] = qmem  # reg | shared: where the ring keeps q's fragments
        if rescale is not None:
            sw["QSA_ATTN_RING_RESCALE"] = rescale  # exact | lazy: when the ring rescales O
        if layout is not None:
            sw["QSA_ATTN_RING_LAYOUT"] = layout  # pad | swizzle: the ring's slot rows
        if copy is not None:
            sw["QSA_ATTN_RING_COPY"] = copy  # cta | warp: who copies which K / V rows
        if nbuf is not None:
            sw["QSA_ATTN_NBUF"] = nbuf
        if nsplit is not None:
            sw["QSA_ATTN_SPLITS"] = nsplit
        if bwd is not None:
            sw["QSA_ATTN_BWD"] = bwd  # atomic | kv: the staged backward's dK / dV path
        return self.planner.plan("attention", shape, variant, sw, backward)

    def fwd(self, P, o, lse, plan):
        """A call of a forward plan into o, lse (workspaces of its splits allocated here)."""
        return qsa_plan.Call(plan, self.launcher, alloc=qsa_plan.torch_alloc,
                             bind=dict(q=P["q"], k=P["k"], v=P["v"], ids=P["ids"], o=o, lse=lse))

    def bwd(self, P, o, lse, dq, dk, dv, plan):
        """A call of a backward plan: setup() runs its forward into o, lse; the call runs the
        plan's steps (zero-fills of dk / dv where the plan has them, then the launches)."""
        return qsa_plan.Call(plan, self.launcher, alloc=qsa_plan.torch_alloc,
                             bind=dict(q=P["q"], k=P["k"], v=P["v"], ids=P["ids"], o=o, lse=lse,
                                       d_o=P["do"], dq=dq, dk=dk, dv=dv))


def staged_note(plan):
    """The staged launch's grid and shared bytes, as the plan gives them. A backward plan's
    call begins with zero-fills of dk / dv (steps without a grid): take the first launch."""
    launches = [s for s in plan["call"] if "grid" in s]
    st = next((s for s in launches if any(k in s.get("kernel", "") for k in ("staged", "ring", "warp"))), launches[0])
    name = st.get("kernel", "").removeprefix("qsa_attn_")
    return f"{name} grid {st['grid'][0]}x{st['grid'][1]}, {st['shared_bytes']} B shared"


STAGED = {"QSA_ATTN_KERNEL": "staged"}
DECODE_FORCED = {"QSA_ATTN_KERNEL": "decode"}


def sweep(qsa, shape, base, backward=False, splits=True):
    """(label, plan) of the staged kernel's staging-depth (and split) sweep around `base`: the
    plans whose launches differ from it."""
    seen = [base["call"]]
    for nb in SWEEP_NBUF:
        for ns in (SWEEP_SPLITS if splits else (None,)):
            p = qsa.plan(shape, backward, nbuf=nb, nsplit=ns, fwd="staged", sw=STAGED)
            if p["call"] not in seen:
                seen.append(p["call"])
                yield f"nbuf={nb}" + (f" split={ns}" if ns is not None else ""), p


def warp_sweep(qsa, shape):
    """(label, plan) of the warp forward's sweep (SWEEP_WARP)."""
    for warps, keys, st, parts, rescale in SWEEP_WARP:
        yield (f"warp warps={warps} keys={keys} stages={st} parts={parts} rescale={rescale}",
               qsa.plan(shape, fwd="warp", sw=warp_sw(warps, keys, st, parts, rescale)))


def ring_sweep(qsa, shape, base):
    """(label, plan) of the ring forward's slots (kernels/common/attention_ring_fwd.h) whose
    launches differ from `base`: whole-block slots and slots of K or V rows ("half")."""
    for slot, st, parts, order, qmem, rescale, layout, copy in SWEEP_RING:
        p = qsa.plan(shape, fwd="ring", stages=st, slot=slot, parts=parts, order=order, qmem=qmem, rescale=rescale,
                     layout=layout, copy=copy)
        if p["call"] != base["call"]:
            yield f"ring {slot} stages={st} parts={parts} order={order} q={qmem} rescale={rescale} {layout} copy={copy}", p


# The KV-block-major kernel's bf16 products (QSA_ATTN_KV_MMA=bf16: qsa_attn_kv16_*; bf16 inputs)
# and dO's parts in its dP (QSA_ATTN_KV_DP_PARTS).
KV16 = {"QSA_ATTN_KV_MMA": "bf16"}
KV16_DP2 = {"QSA_ATTN_KV_MMA": "bf16", "QSA_ATTN_KV_DP_PARTS": 2}
KV16S = {"QSA_ATTN_KV_MMA": "bf16s"}  # and dO split once per tile (3 parts)
# The split kernel without shared bank conflicts (QSA_ATTN_KV_LAYOUT=nc, qsa_attn_kv16sc_dq_bwd_bf16;
# same arithmetic). The one-part P / dS form (QSA_ATTN_KV_PS_PARTS=1) is over the gate by design:
# bench/attn_bwd_forms.py measures it beside fla, not as a check row here.
KV16SC = {"QSA_ATTN_KV_MMA": "bf16s", "QSA_ATTN_KV_LAYOUT": "nc"}
CHECK_VARIANTS = [("gather", "gather", {}), ("staged", "auto", {}), ("staged nbuf=1", "auto", {"nbuf": 1}),
                  ("staged split=3", "auto", {"nsplit": 3}), ("staged atomic-bwd", "auto", {"bwd": "atomic"}),
                  ("staged kv-bwd", "auto", {"bwd": "kv"}), ("staged kvdq-bwd", "auto", {"bwd": "kvdq"}),
                  ("staged kv-bwd kv16", "auto", {"bwd": "kv", "sw": KV16}),
                  ("staged kvdq-bwd kv16", "auto", {"bwd": "kvdq", "sw": KV16}),
                  ("staged kvdq-bwd kv16 dp=2", "auto", {"bwd": "kvdq", "sw": KV16_DP2}),
                  ("staged kv-bwd kv16s", "auto", {"bwd": "kv", "sw": KV16S}),
                  ("staged kvdq-bwd kv16s", "auto", {"bwd": "kvdq", "sw": KV16S}),
                  ("staged kvdq-bwd kv16sc", "auto", {"bwd": "kvdq", "sw": KV16SC}),
                  ("staged fwd", "auto", {"fwd": "staged"}), ("ring", "auto", {"fwd": "ring"}),
                  ("ring stages=4 split=3", "auto", {"fwd": "ring", "stages": 4, "nsplit": 3}),
                  ("ring half stages=5", "auto", {"fwd": "ring", "stages": 5, "slot": "half"}),
                  ("ring parts=2", "auto", {"fwd": "ring", "parts": 2}),
                  ("ring order=head", "auto", {"fwd": "ring", "order": "head"}),
                  ("ring q=shared half stages=3", "auto", {"fwd": "ring", "qmem": "shared", "slot": "half",
                                                          "stages": 3}),
                  ("ring lazy", "auto", {"fwd": "ring", "rescale": "lazy"}),
                  ("ring lazy q=shared half stages=3", "auto", {"fwd": "ring", "rescale": "lazy", "qmem": "shared",
                                                               "slot": "half", "stages": 3}),
                  ("ring swizzle", "auto", {"fwd": "ring", "layout": "swizzle"}),
                  ("ring swizzle lazy half stages=3", "auto", {"fwd": "ring", "layout": "swizzle", "rescale": "lazy",
                                                              "slot": "half", "stages": 3}),
                  ("ring copy=warp", "auto", {"fwd": "ring", "copy": "warp"}),
                  ("ring copy=warp lazy q=shared half stages=3", "auto", {"fwd": "ring", "copy": "warp", "rescale": "lazy",
                                                                         "qmem": "shared", "slot": "half", "stages": 3}),
                  ("warp", "auto", {"fwd": "warp"}),
                  ("warp warps=2 keys=32 stages=3 parts=3 exact", "auto",
                   {"fwd": "warp", "sw": warp_sw(2, 32, 3, 3, "exact")}),
                  ("warp warps=7 keys=64 stages=2 parts=2 lazy", "auto",
                   {"fwd": "warp", "sw": warp_sw(7, 64, 2, 2, "lazy")})]
# The prefill backward's variants (label, switches): the default, each backward path forced
# (kvdq: the KV-block-major kernel alone, dQ by atomics), and the query-side pass with
# double-buffered K / V (QSA_ATTN_NBUF=2) where there is one.
BWD_VARIANTS = [("", {}), (" atomic", {"bwd": "atomic"}), (" kv", {"bwd": "kv"}), (" kvdq", {"bwd": "kvdq"}),
                (" atomic nbuf=2", {"bwd": "atomic", "nbuf": 2}), (" kv nbuf=2", {"bwd": "kv", "nbuf": 2})]
BWD_VARIANTS += [(" kv kv16", {"bwd": "kv", "sw": KV16}), (" kvdq kv16", {"bwd": "kvdq", "sw": KV16}),
                 (" kv kv16 dp=2", {"bwd": "kv", "sw": KV16_DP2}), (" kvdq kv16 dp=2", {"bwd": "kvdq", "sw": KV16_DP2}),
                 (" kv kv16s", {"bwd": "kv", "sw": KV16S}), (" kvdq kv16s", {"bwd": "kvdq", "sw": KV16S})]


def is_kv_pass(kernel):
    """The KV-block-major backward launch: qsa_attn_kv{,16}_{,dq_}bwd_*."""
    return kernel.startswith(("qsa_attn_kv_", "qsa_attn_kv16_")) and "_bwd_" in kernel


def is_decode(plan):
    return plan["dispatched"].startswith("decode")


def dec_note(plan):
    """The decode launch's grid, block and shared bytes, and the merge, as the plan gives them."""
    st = next(s for s in plan["call"] if "fwd" in s.get("kernel", ""))
    merge = " + combine launch" if any(s.get("kernel") == "qsa_attn_combine" for s in plan["call"]) else ""
    return f"{plan['dispatched']}: grid {st['grid'][0]}x{st['grid'][1]}, block {st['block'][0]}, " \
           f"{st['shared_bytes']} B shared{merge}"


def is_probe(label):
    return "probe=" in label


def dec_sweep(qsa, shape, base):
    """(label, plan) of the decode kernel's sweep around `base` (a decode plan): the plans
    whose launches differ from it and from each other."""
    seen = [base["call"]]
    tries = []
    if DEC_SWEEP == "all":
        tries += [{"QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_STAGES": st} for w, st in DEC_WARPS_STAGES]
        tries += [{"QSA_ATTN_DEC_SPLITS": n, "QSA_ATTN_DEC_MERGE": m} for n in DEC_SPLITS for m in DEC_MERGES]
        tries += DEC_CLUSTER
        tries += DEC_PAIR
        tries += DEC_WARPS_SPLITS
    tries += DEC_NEW
    tries += DEC_PROBES
    for sw in tries:
        try:
            p = qsa.plan(shape, sw=sw)
        except qsa_plan.PlanError:  # e.g. a ring that does not fit this target's shared memory
            continue
        if is_decode(p) and p["call"] not in seen:
            seen.append(p["call"])
            yield " ".join(f"{k.removeprefix('QSA_ATTN_DEC_').lower()}={v}" for k, v in sw.items()), p


# Forward-only checks of the decode kernel (forced on every check shape; the backward's own
# forward stays staged): its in-kernel and second-launch merges, and few / many warps.
CHECK_DECODE = [("decode", {"QSA_ATTN_KERNEL": "decode"}),
                ("decode split=3 merge=kernel", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_SPLITS": 3}),
                ("decode split=3 merge=launch", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_SPLITS": 3,
                                                 "QSA_ATTN_DEC_MERGE": "launch"}),
                ("decode warps=1 stages=1", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_WARPS": 1,
                                             "QSA_ATTN_DEC_STAGES": 1}),
                ("decode warps=8 stages=2 split=2", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_WARPS": 8,
                                                     "QSA_ATTN_DEC_STAGES": 2, "QSA_ATTN_DEC_SPLITS": 2}),
                ("decode merge=cluster", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "cluster"}),
                ("decode warps=4 split=3", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_WARPS": 4,
                                            "QSA_ATTN_DEC_SPLITS": 3}),
                ("decode pair=1 split=3", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_PAIR": 1,
                                           "QSA_ATTN_DEC_SPLITS": 3}),
                ("decode merge=push", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "push"}),
                ("decode merge=push warps=4 stages=2", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "push",
                                                        "QSA_ATTN_DEC_WARPS": 4, "QSA_ATTN_DEC_STAGES": 2}),
                ("decode prefetch=256 split=3", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_PREFETCH": 256,
                                                 "QSA_ATTN_DEC_SPLITS": 3}),
                ("decode order=interleave ahead=3 warps=3", {"QSA_ATTN_KERNEL": "decode",
                                                             "QSA_ATTN_DEC_ORDER": "interleave",
                                                             "QSA_ATTN_DEC_AHEAD": 3, "QSA_ATTN_DEC_WARPS": 3})]
DECODE = [("decode 16 q x 8 kv heads, 262K", 1, 16, 262144, 128, 8),
          ("decode 16 q x 8 kv heads, 262K", 1, 16, 262144, 64, 8),
          ("decode 1 q x 8 kv heads, 262K", 1, 1, 262144, 128, 8),
          ("decode 1 q x 8 kv heads, 262K", 1, 1, 262144, 64, 8)]
PREFILL = ("prefill B=4 T=16K 64/4 heads, 16 blocks", 4, 16384, 16384, 64, 4)
SCALE = 1.0 / math.sqrt(D)


def bench_shape(B, Tq, Tk, hq, hkv):
    return dict(batch=B, q_len=Tq, kv_len=Tk, hq=hq, hkv=hkv, t=16, dtype="bf16", scale=repr(SCALE))


def fwd_sweeps(qsa, shape, base, which="all"):
    """(label, plan) of the prefill forward's sweeps: the warp forward's, then (`all`) the
    staged kernel's depth and the ring's (swept in session 7: `--fwd-sweep warp` keeps only the
    ring's default plan)."""
    out = list(warp_sweep(qsa, shape))
    if which == "all":
        out += list(sweep(qsa, shape, base, splits=False)) + list(ring_sweep(qsa, shape, base))
    else:  # the ring forward's default plan, for comparison (sm_90's default until session 8)
        out.append(("ring", qsa.plan(shape, fwd="ring")))
    return out


def planned(qsa, check=True, bench=True, decode_only=False, fwd_sweep="all"):
    """(label, plan) of every call this script launches."""
    if check:
        for name, B, Tq, Tk, hq, hkv, t, dt in CHECK_CASES:
            shape = dict(batch=B, q_len=Tq, kv_len=Tk, hq=hq, hkv=hkv, t=t, dtype=dt, scale=repr(SCALE))
            for vname, variant, kw in CHECK_VARIANTS:
                yield f"check {name} {vname} bwd", qsa.plan(shape, True, variant, **kw)
            for vname, sw in CHECK_DECODE:
                p = qsa.plan(shape, sw=sw)
                if is_decode(p):
                    yield f"check {name} {vname} fwd", p
    if bench:
        for case, B, Tq, Tk, hq, hkv in DECODE:
            shape = bench_shape(B, Tq, Tk, hq, hkv)
            base = qsa.plan(shape)
            yield f"{case} g{hq // hkv} {base['dispatched']}", base
            yield f"{case} g{hq // hkv} gather", qsa.plan(shape, variant="gather")
            staged = qsa.plan(shape, sw=STAGED)
            if staged["call"] != base["call"]:
                yield f"{case} g{hq // hkv} staged", staged
            if is_decode(base):
                for label, p in dec_sweep(qsa, shape, base):
                    yield f"{case} g{hq // hkv} decode {label}", p
            if decode_only:
                continue
            for label, p in sweep(qsa, shape, staged):
                yield f"{case} g{hq // hkv} staged {label}", p
        for case, B, Tq, Tk, hq, hkv in DECODE_ITEMS:
            shape = bench_shape(B, Tq, Tk, hq, hkv)
            yield f"{case} decode", qsa.plan(shape, sw=DECODE_FORCED)
            yield f"{case} staged", qsa.plan(shape, sw=STAGED)
        if decode_only:
            return
        case, B, Tq, Tk, hq, hkv = PREFILL
        shape = bench_shape(B, Tq, Tk, hq, hkv)
        base = qsa.plan(shape)
        yield f"{case} staged", base
        for label, p in fwd_sweeps(qsa, shape, base, fwd_sweep):
            yield f"{case} staged {label}", p
        for label, kw in BWD_VARIANTS:
            yield f"{case} staged bwd{label}", qsa.plan(shape, True, **kw)
        yield f"{case} gather", qsa.plan(shape, variant="gather")


# ---- problems ---------------------------------------------------------------------------------
def make_problem(batch, q_len, kv_len, hq, hkv, t, dtype, seed, ids=None, ids_kind="random"):
    g = torch.Generator(device="cuda").manual_seed(seed)
    td = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    q = torch.randn(batch, q_len, hq, D, device="cuda", generator=g).to(td)
    k = torch.randn(batch, kv_len, hkv, D, device="cuda", generator=g).to(td)
    v = torch.randn(batch, kv_len, hkv, D, device="cuda", generator=g).to(td)
    do = torch.randn(batch, q_len, hq, D, device="cuda", generator=g)
    nblk = (kv_len + BLK - 1) // BLK
    if ids is None:
        if ids_kind == "random":  # repeats, -1, and ids past the causal edge or kv_len
            ids = torch.randint(-1, nblk + 2, (batch, q_len, hkv, t), device="cuda", generator=g)
        else:  # distinct causal ids (benchmark form, what a top-k emits), -1 past the count
            pos = kv_len - q_len + torch.arange(q_len, device="cuda")
            vis = (pos // BLK + 1).clamp(max=nblk)
            r = torch.rand(batch, q_len, hkv, nblk, device="cuda", generator=g)
            r = torch.where(torch.arange(nblk, device="cuda")[None, None, None, :] < vis[None, :, None, None],
                            r, torch.full_like(r, -1.0))
            val, idx = torch.topk(r, min(t, nblk), dim=-1)
            idx = torch.where(val < 0, torch.full_like(idx, -1), idx)
            ids = torch.sort(idx, dim=-1).values
            if ids.shape[-1] < t:
                ids = torch.cat([ids, torch.full((batch, q_len, hkv, t - ids.shape[-1]), -1, device="cuda",
                                                 dtype=ids.dtype)], -1)
            del r, val, idx
    ids = ids.to(torch.int32).contiguous()
    return dict(batch=batch, q_len=q_len, kv_len=kv_len, hq=hq, hkv=hkv, t=t, dtype=dtype,
                scale=SCALE, q=q, k=k, v=v, ids=ids, do=do)


def visibility(P):
    """[b, i, g, j] bool: key j visible to (b, i, g) — a set, so repeated ids count once."""
    B, Tq, Tk, H = P["batch"], P["q_len"], P["kv_len"], P["hkv"]
    ids = P["ids"].long()
    nblk = (Tk + BLK - 1) // BLK
    sel = torch.zeros(B, Tq, H, nblk + 1, dtype=torch.bool, device="cuda")
    idc = torch.where((ids >= 0) & (ids < nblk), ids, torch.full_like(ids, nblk))
    sel.scatter_(-1, idc, True)
    sel = sel[..., :nblk]
    vis = sel.repeat_interleave(BLK, dim=-1)[..., :Tk]
    pos = Tk - Tq + torch.arange(Tq, device="cuda")
    causal = torch.arange(Tk, device="cuda")[None, :] <= pos[:, None]
    return vis & causal[None, :, None, :]


def reference(P):
    """float64 forward and backward of the contract."""
    G = P["hq"] // P["hkv"]
    q = P["q"].double().requires_grad_(True)
    k = P["k"].double().requires_grad_(True)
    v = P["v"].double().requires_grad_(True)
    vis = visibility(P).repeat_interleave(G, dim=2)  # [b, i, h, j]
    kk = k.repeat_interleave(G, dim=2)
    vv = v.repeat_interleave(G, dim=2)
    s = torch.einsum("bihd,bjhd->bihj", q, kk) * P["scale"]
    s = torch.where(vis, s, torch.full_like(s, -math.inf))
    lse = torch.logsumexp(s, dim=-1)
    none = torch.isinf(lse)
    lse_safe = torch.where(none, torch.zeros_like(lse), lse)
    p = torch.where(vis, torch.exp(s - lse_safe[..., None]), torch.zeros_like(s))
    o = torch.einsum("bihj,bjhd->bihd", p, vv)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), P["do"].double())
    return dict(o=o.detach(), lse=lse.detach(), dq=dq, dk=dk, dv=dv)


def err(x, ref):
    x = x.double().reshape(ref.shape)
    fin = torch.isfinite(ref)
    same_inf = bool(torch.equal(torch.isinf(x) & ~fin, ~fin))
    d = (x - ref)[fin]
    if d.numel() == 0:
        return 0.0, 0.0, same_inf
    return d.abs().max().item(), d.pow(2).mean().sqrt().item(), same_inf


# ---- check ------------------------------------------------------------------------------------
CHECK_CASES = [
    # name, batch, q_len, kv_len, hq, hkv, t, dtype
    ("g4 partial-last-block", 2, 37, 1000, 16, 4, 8, "bf16"),
    ("g4 f16", 2, 37, 1000, 16, 4, 8, "f16"),
    ("g8", 1, 20, 333, 16, 2, 6, "f16"),
    ("g8 bf16", 1, 20, 333, 16, 2, 6, "bf16"),
    ("g16 decode", 2, 5, 4100, 32, 2, 16, "bf16"),
    ("g16 decode f16", 2, 5, 4100, 32, 2, 16, "f16"),
    ("g16 causal from 0", 1, 200, 200, 16, 1, 4, "f16"),
    ("g32 two chunks", 1, 9, 700, 32, 1, 5, "bf16"),
    ("g1", 1, 33, 500, 2, 2, 7, "bf16"),
    ("g3 odd", 1, 11, 640, 6, 2, 4, "f16"),
]


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
        # The decode forward (forced on this shape where built): o and lse, same gate.
        for vname, sw in CHECK_DECODE:
            plan = qsa.plan(shape, sw=sw)
            if not is_decode(plan):
                continue
            o = torch.full((rows * D,), float("nan"), device="cuda")
            lse = torch.full((rows,), float("nan"), device="cuda")
            call = qsa.fwd(P, o, lse, plan)
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
        del P, R
    text = "\n".join(lines)
    print(text)
    return text, ok_all


# ---- bench ------------------------------------------------------------------------------------
def time_ms(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2], ts[0], ts[-1]


_FLUSH = {}


def time_graph(fn, inner=20, reps=15, cold=False):
    try:
        return _time_graph(fn, inner, reps, cold)
    except Exception as e:  # say so, and fall back to plain events (launch overhead included)
        print("CUDA graph timing failed, plain events instead:", repr(e), flush=True)
        torch.cuda.synchronize()
        return time_ms(fn)


def _time_graph(fn, inner, reps, cold):
    """Median per-call ms of `inner` calls replayed from one CUDA graph (no Python launch
    overhead in the timing). cold=True puts a 256 MB write before each call (evicting the
    60 MB L2) and subtracts the same graph without the calls."""
    if "buf" not in _FLUSH:
        _FLUSH["buf"] = torch.empty(64 << 20, device="cuda")
    flush = lambda: _FLUSH["buf"].fill_(1.0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()

    def build(with_fn):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(inner):
                if cold:
                    flush()
                if with_fn:
                    fn()
        return g

    def med(g):
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / inner)
        ts.sort()
        return ts

    ts = med(build(True))
    if cold:
        base = med(build(False))[reps // 2]
        ts = [x - base for x in ts]
    return ts[reps // 2], ts[0], ts[-1]


def torch_sel_attn(P, idx, mask):
    """torch: gather the selected K/V rows, then scaled_dot_product_attention per (b, i, g)."""
    B, Tq, H, G = P["batch"], P["q_len"], P["hkv"], P["hq"] // P["hkv"]
    N = B * Tq * H
    kf = P["k"].permute(0, 2, 1, 3)  # [B, H, Tk, D]
    bi = torch.arange(B, device="cuda")[:, None, None, None]
    hi = torch.arange(H, device="cuda")[None, None, :, None]
    ks = kf[bi, hi, idx].reshape(N, 1, -1, D)
    vs = P["v"].permute(0, 2, 1, 3)[bi, hi, idx].reshape(N, 1, -1, D)
    qs = P["q"].reshape(N, G, D)[:, None]
    return torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=P["scale"])


def torch_index(P):
    """Token indices [B, Tq, H, t*64] and the visibility mask (dedup, causal) for the torch path."""
    ids = P["ids"].long()
    t = P["t"]
    first = torch.ones_like(ids, dtype=torch.bool)
    for s in range(1, t):
        first[..., s] = (ids[..., s:s + 1] != ids[..., :s]).all(-1)
    idx = ids.clamp(min=0)[..., None] * BLK + torch.arange(BLK, device="cuda")
    pos = P["kv_len"] - P["q_len"] + torch.arange(P["q_len"], device="cuda")
    ok = (ids >= 0) & first
    vis = ok[..., None] & (idx <= pos[None, :, None, None, None])
    idx = idx.clamp(max=P["kv_len"] - 1).reshape(*ids.shape[:3], -1)
    N = idx.shape[0] * idx.shape[1] * idx.shape[2]
    return idx, vis.reshape(N, 1, 1, -1)


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
        P = make_problem(B, Tq, Tk, hq, hkv, 16, "bf16", seed=7, ids_kind="distinct")
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
    for case, B, Tq, Tk, hq, hkv in (DECODE_ITEMS if decode else []):
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
    fla_f = fla_b = None
    if fla is not None:
        try:
            from fla.ops.nsa.parallel import ParallelNSAFunction, parallel_nsa_fwd
            qf = P["q"].clone().requires_grad_(True)
            kf = P["k"].clone().requires_grad_(True)
            vf = P["v"].clone().requires_grad_(True)
            bidx = P["ids"].long()
            fwd = lambda: parallel_nsa_fwd(q=qf, k=kf, v=vf, block_indices=bidx, block_counts=16, block_size=BLK,
                                           scale=P["scale"])
            fla_f = time_ms(fwd, warmup=2, reps=5)
            o_fla = ParallelNSAFunction.apply(qf, kf, vf, bidx, 16, BLK, P["scale"], None)
            do_b = P["do"].to(torch.bfloat16)
            bwd = lambda: torch.autograd.grad(o_fla, (qf, kf, vf), do_b, retain_graph=True)
            fla_b = time_ms(bwd, warmup=1, reps=3)
            add(case, 16, "fla parallel_nsa fwd", fla_f)
            add(case, 16, "fla parallel_nsa bwd", fla_b, note="autograd.grad of ParallelNSAFunction")
            fla_o = o_fla.detach().float().reshape(-1)
            del qf, kf, vf
        except Exception as e:  # report, never hide
            print("fla failed:", repr(e), flush=True)
            rows_md.append(f"| {case} | 16 | fla | - | - | - | - | - | failed: {type(e).__name__}: {e} |")
            fla = None
    shape = bench_shape(4, 16384, 16384, 64, 4)
    plan = qsa.plan(shape)
    staged = qsa.fwd(P, o, lse, plan)
    staged.setup()
    tf = time_ms(staged, warmup=2, reps=5)
    flop = 4 * 16384 * 64 * 16 * BLK * D * 4
    note = f"{staged_note(plan)}, {flop / tf[0] / 1e9:.0f} TFLOP/s"
    if fla is not None:
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
    ap.add_argument("--decode-sweep", choices=("all", "new"), default="all",
                    help="the decode kernel's variant rows: every sweep (all), or only the probes and this "
                         "session's variants (new: DEC_NEW, DEC_PROBES)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    qsa_plan.add_plan_args(ap)
    a = ap.parse_args()
    global DEC_SWEEP
    DEC_SWEEP = a.decode_sweep
    planner = qsa_plan.Planner(a.qsa, a.target, a.matrix)
    if a.plan_only:
        return qsa_plan.plan_only(planned(Qsa(planner, None), a.check or not a.bench, a.bench or not a.check,
                                          a.decode_only, a.fwd_sweep), sys.stdout)
    global torch
    import torch

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

"""The calls bench/attention_vs_torch.py makes, as plans of `qsa plan --json` (the launches the
Rust runner makes: bench/qsa_plan.py): its shapes and check cases, the variants and sweeps
(switches) of each kernel, and `planned`, every (label, plan) of a run (what --plan-only
lists). This module derives no launch rule, and imports no torch (--plan-only runs without it).
"""
import math

import qsa_plan

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


from attention_decode_sweeps import (  # the decode sweep rows, picked by DEC_SWEEP below
    DEC_WARPS_STAGES, DEC_SPLITS, DEC_MERGES, DEC_CLUSTER, DEC_PAIR, DEC_WARPS_SPLITS, DEC_PROBES, DEC_NEW,
    DEC_HND, DEC_ONE_CTA, DEC_CHAIN, DEC_DYN, DEC_HND_DYN, DEC_FLAT, DEC_HND_FLAT, DEC_QS, DEC_HND_QS,
    DEC_LEAN, DEC_HND_LEAN, DEC_BULK, DEC_HND_BULK, DEC_HD, DEC_HND_HD)

# --decode-sweep new: only the probes and DEC_NEW (the earlier sweeps were measured in session 7);
# hnd: the NHD auto / gather / probe rows (the fla-layout figure stays next to the new one) and
# DEC_HND, without the items-per-SM rows.
DEC_SWEEP = "all"
# The decode kernel against the staged kernel as work items per SM grow (group 16, 8 KV heads,
# 262K; 8 items per query token): where the dispatch's MAX_ITEMS_PER_SM should switch.
DECODE_ITEMS = [(f"decode {tq} q x 8 kv heads, 262K", 1, tq, 262144, 128, 8) for tq in (32, 64, 128, 256)]


# The check's cases (bench/attention_check.py runs each against FP64).
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



def shape_of(P):
    return dict(batch=P["batch"], q_len=P["q_len"], kv_len=P["kv_len"], hq=P["hq"], hkv=P["hkv"],
                t=P["t"], dtype=P["dtype"], scale=repr(float(P["scale"])))


def torch_bf16():
    import torch  # (this module stays importable without torch: --plan-only)

    return torch.bfloat16


class Qsa:
    def __init__(self, planner, launcher):
        self.planner = planner
        self.launcher = launcher

    def plan(self, shape, backward=False, variant="auto", nbuf=None, nsplit=None, bwd=None, fwd=None,
             stages=None, slot=None, parts=None, order=None, qmem=None, rescale=None, layout=None, copy=None,
             sw=None, do_dtype=None):
        sw = dict(sw or {})
        if do_dtype is not None:
            shape = dict(shape, do_dtype=do_dtype)  # f32 | bf16: the backward's dO as given
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
        # dO as the plan takes it: f32, or bf16 where its shape says do_dtype=bf16 (the values
        # fla's backward gets: attention_peers.fla_prefill rounds P["do"] so).
        d_o = P["do"].to(torch_bf16()) if plan["shape"].get("do_dtype") == "bf16" else P["do"]
        return qsa_plan.Call(plan, self.launcher, alloc=qsa_plan.torch_alloc,
                             bind=dict(q=P["q"], k=P["k"], v=P["v"], ids=P["ids"], o=o, lse=lse,
                                       d_o=d_o, dq=dq, dk=dk, dv=dv))


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
# The split kernel with dO in two parts for dP (QSA_ATTN_KV_DP_PARTS=2, qsa_attn_kv16sp2_dq_bwd_bf16;
# session 10's default candidate: must pass the gate).
KV16SP2 = {"QSA_ATTN_KV_MMA": "bf16s", "QSA_ATTN_KV_DP_PARTS": 2}
CHECK_VARIANTS = [("gather", "gather", {}), ("staged", "auto", {}), ("staged nbuf=1", "auto", {"nbuf": 1}),
                  ("staged split=3", "auto", {"nsplit": 3}), ("staged atomic-bwd", "auto", {"bwd": "atomic"}),
                  ("staged kv-bwd", "auto", {"bwd": "kv"}), ("staged kvdq-bwd", "auto", {"bwd": "kvdq"}),
                  ("staged kv-bwd kv16", "auto", {"bwd": "kv", "sw": KV16}),
                  ("staged kvdq-bwd kv16", "auto", {"bwd": "kvdq", "sw": KV16}),
                  ("staged kvdq-bwd kv16 dp=2", "auto", {"bwd": "kvdq", "sw": KV16_DP2}),
                  ("staged kv-bwd kv16s", "auto", {"bwd": "kv", "sw": KV16S}),
                  ("staged kvdq-bwd kv16s", "auto", {"bwd": "kvdq", "sw": KV16S}),
                  ("staged kvdq-bwd kv16sc", "auto", {"bwd": "kvdq", "sw": KV16SC}),
                  ("staged kvdq-bwd kv16sp2", "auto", {"bwd": "kvdq", "sw": KV16SP2}),
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
# " dO bf16": the default path given dO as bf16, as fla's backward is (kvwg2ab at the prefill
# shape: src/dispatch/attention_do.rs).
BWD_VARIANTS = [("", {}), (" dO bf16", {"do_dtype": "bf16"}), (" atomic", {"bwd": "atomic"}), (" kv", {"bwd": "kv"}), (" kvdq", {"bwd": "kvdq"}),
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
    if DEC_SWEEP == "hnd":
        tries += DEC_PROBES + DEC_ONE_CTA
    if DEC_SWEEP == "dyn":
        tries += DEC_CHAIN + DEC_DYN
    if DEC_SWEEP == "flat":
        tries += DEC_CHAIN + DEC_FLAT
    if DEC_SWEEP == "qs":
        tries += DEC_CHAIN + DEC_QS
    if DEC_SWEEP == "lean":
        tries += DEC_CHAIN + DEC_LEAN
    if DEC_SWEEP == "bulk":
        tries += DEC_CHAIN + DEC_BULK
    if DEC_SWEEP == "hd":
        tries += DEC_CHAIN + DEC_HD
    if DEC_SWEEP == "all":
        tries += [{"QSA_ATTN_DEC_WARPS": w, "QSA_ATTN_DEC_STAGES": st} for w, st in DEC_WARPS_STAGES]
        tries += [{"QSA_ATTN_DEC_SPLITS": n, "QSA_ATTN_DEC_MERGE": m} for n in DEC_SPLITS for m in DEC_MERGES]
        tries += DEC_CLUSTER
        tries += DEC_PAIR
        tries += DEC_WARPS_SPLITS
    if DEC_SWEEP in ("all", "new"):
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
                                                             "QSA_ATTN_DEC_AHEAD": 3, "QSA_ATTN_DEC_WARPS": 3}),
                ("decode order=dynamic warps=3 split=2", {"QSA_ATTN_KERNEL": "decode",
                                                          "QSA_ATTN_DEC_ORDER": "dynamic", "QSA_ATTN_DEC_WARPS": 3,
                                                          "QSA_ATTN_DEC_SPLITS": 2}),
                ("decode order=dynamic merge=cluster", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_ORDER": "dynamic",
                                                        "QSA_ATTN_DEC_MERGE": "cluster"}),
                ("decode merge=flat", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "flat"}),
                ("decode merge=flat warps=3 stages=2", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "flat",
                                                        "QSA_ATTN_DEC_WARPS": 3, "QSA_ATTN_DEC_STAGES": 2}),
                ("decode qload=cta", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_QLOAD": "cta"}),
                ("decode qload=cta warps=3 split=3", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_QLOAD": "cta",
                                                      "QSA_ATTN_DEC_WARPS": 3, "QSA_ATTN_DEC_SPLITS": 3}),
                ("decode qload=cta merge=cluster", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_QLOAD": "cta",
                                                    "QSA_ATTN_DEC_MERGE": "cluster"}),
                ("decode merge=lean", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "lean"}),
                ("decode merge=lean warps=3 stages=2", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "lean",
                                                        "QSA_ATTN_DEC_WARPS": 3, "QSA_ATTN_DEC_STAGES": 2}),
                ("decode merge=lean qload=cta", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_MERGE": "lean",
                                                 "QSA_ATTN_DEC_QLOAD": "cta"}),
                ("decode dims=half", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_DIMS": "half"}),
                ("decode dims=half warps=4 split=3 order=interleave",
                 {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_DIMS": "half", "QSA_ATTN_DEC_WARPS": 4,
                  "QSA_ATTN_DEC_SPLITS": 3, "QSA_ATTN_DEC_ORDER": "interleave"}),
                ("decode dims=half merge=cluster", {"QSA_ATTN_KERNEL": "decode", "QSA_ATTN_DEC_DIMS": "half",
                                                    "QSA_ATTN_DEC_MERGE": "cluster"})]
# The same forms on the head-major twin (kv_layout=hnd: K / V permuted to [B, H, Tk, D]).
CHECK_DECODE_HND = [(f"{name} hnd", sw) for name, sw in CHECK_DECODE
                    if name in ("decode", "decode split=3 merge=kernel", "decode merge=cluster", "decode merge=push",
                                "decode prefetch=256 split=3", "decode order=interleave ahead=3 warps=3",
                                "decode order=dynamic warps=3 split=2", "decode merge=flat", "decode qload=cta",
                                "decode merge=lean", "decode dims=half")]
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


def hnd_sweep(qsa, shape):
    """(label, plan) of DEC_HND on the head-major twin of `shape` (decode plans only)."""
    hshape = dict(shape, kv_layout="hnd")
    seen = []
    for sw in {"dyn": DEC_HND_DYN, "flat": DEC_HND_FLAT, "qs": DEC_HND_QS, "lean": DEC_HND_LEAN, "bulk": DEC_HND_BULK,
               "hd": DEC_HND_HD}.get(DEC_SWEEP, DEC_HND):
        try:
            p = qsa.plan(hshape, sw=sw)
        except qsa_plan.PlanError:
            continue
        if is_decode(p) and p["call"] not in seen:
            seen.append(p["call"])
            yield "hnd " + (" ".join(f"{k.removeprefix('QSA_ATTN_DEC_').lower()}={v}" for k, v in sw.items())
                            or "(auto)"), p


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
            for vname, sw in CHECK_DECODE_HND:
                p = qsa.plan(dict(shape, kv_layout="hnd"), sw=sw)
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
                for label, p in hnd_sweep(qsa, shape):
                    yield f"{case} g{hq // hkv} decode {label}", p
            if decode_only:
                continue
            for label, p in sweep(qsa, shape, staged):
                yield f"{case} g{hq // hkv} staged {label}", p
        for case, B, Tq, Tk, hq, hkv in ([] if DEC_SWEEP in ("hnd", "dyn", "flat", "qs", "lean", "bulk", "hd") else DECODE_ITEMS):
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

#!/usr/bin/env python3
"""The fused KV-block-major backward's forms beside fla's parallel_nsa backward, on one H200, in
one process (issue 13): the default (qsa_attn_kv16s_dq_bwd_bf16: P, dS and dO in bf16 hi + lo),
QSA_ATTN_KV_LAYOUT=nc (qsa_attn_kv16sc_dq_bwd_bf16: no shared bank conflicts, same arithmetic)
QSA_ATTN_KV_PS_PARTS=1 (qsa_attn_kv16sp1_dq_bwd_bf16: P and dS in one bf16 part, fla's
precision: a measurement form), QSA_ATTN_KV_DP_PARTS=2 (qsa_attn_kv16sp2_dq_bwd_bf16: dO in
two bf16 parts for dP, session 10's default candidate) and the wgmma forms (session 11):
QSA_ATTN_KV_MMA=wg (qsa_attn_kvwg_dq_bwd_bf16: 64-row tiles, one warpgroup per KV block,
single-buffered) and wgp (qsa_attn_kvwgp_dq_bwd_bf16: the next tile's rows copied during this
one) and wg2 (qsa_attn_kvwg2_dq_bwd_bf16: two warpgroups per KV block, alternate tiles) and
wg2a (qsa_attn_kvwg2a_dq_bwd_bf16: wg2 with dO landing chunk-major, a conflict-free split),
wg2a3 (qsa_attn_kvwg2a3_dq_bwd_bf16: wg2a with dO in three bf16 parts for dP).
--forms picks them by label (default: default,wg,wgp; the wgmma forms last, so that a
fault there leaves the default's rows printed).

1. Errors against FP64 (bench/attention_vs_torch.py's reference of the contract), qsa's forms
   and fla's side by side, relative max error = max |error| / max |FP64| (the runner's rule;
   gate: matrix.yaml's error_limits.attention.mma.limit). dO is rounded to bf16 first, so fla
   (which takes bf16 dO) and qsa see the same exact inputs: fla's error is its arithmetic's.
   Ids: distinct causal ids (what a top-k emits), -1 past the visible count, which both
   contracts read the same way; q_len == kv_len (fla's layout).
2. Prefill B=4, T=16K, 64 / 4 heads, 16 blocks (bench/attention_vs_torch.py's case and seed):
   medians of CUDA-event timings, fla's backward and each form's whole backward call, and each
   form's max |d - default| (dk / dv of nc must be 0: plain stores of the same sums).

    python3 bench/attn_bwd_forms.py --qsa .h200/qsa --kernels build/kernels/sm_90 --out $OUT \
        --forms default,wg,wgp
"""
import argparse
import datetime
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention_plans  # noqa: E402  (torch-free: shapes and plans, enough for --plan-only)
import qsa_plan  # noqa: E402

# The helpers of bench/attention_vs_torch.py's modules this script uses; the torch-side ones
# (inputs, FP64 reference, timing, the gate) are added by load_torch_side() after --plan-only.
avt = types.SimpleNamespace(BLK=attention_plans.BLK, D=attention_plans.D, shape_of=attention_plans.shape_of,
                            bench_shape=attention_plans.bench_shape, Qsa=attention_plans.Qsa)


# fla's autotuned kernels key their configs on (BS, BK, BV, G), not on T: the first shape a
# process runs tunes every later one, and with FLA_CACHE_RESULTS=1 (fla's default) the choice
# persists on disk into later processes. Here the error cases (T=1024, 2048) ran first and fla's
# prefill backward read 55.1 ms, against 48.8 in attention_vs_torch.py, which calls fla at the
# prefill shape only (H200, session 15 and 16). So: no cache across processes, and fla tuned at
# the prefill shape before anything else runs (tune_fla_at_the_prefill_shape).
os.environ.setdefault("FLA_CACHE_RESULTS", "0")
PREFILL = (4, 16384, 16384, 64, 4, 16)  # B, Tq, Tk, hq, hkv, t


def tune_fla_at_the_prefill_shape(log):
    """One fla forward + backward at the prefill shape, so that fla's autotuner picks its
    configs for the shape that is timed (see FLA_CACHE_RESULTS above)."""
    import torch

    P = avt.make_problem(*PREFILL, "bf16", seed=9, ids_kind="distinct")
    try:
        g, keep = fla_bwd(P)
        torch.cuda.synchronize()
        del g, keep
        log("fla autotuned at the prefill shape (B=4, T=16K) before the error cases")
    except Exception as e:  # report, never hide: the prefill section reports fla's failure too
        log(f"fla did not run at the prefill shape: {type(e).__name__}: {e}")
    del P
    torch.cuda.empty_cache()


def load_torch_side():
    import attention_problem
    import attention_tables
    import attention_timing

    avt.make_problem, avt.reference, avt.err = (attention_problem.make_problem, attention_problem.reference,
                                                attention_problem.err)
    avt.time_ms, avt.mma_limit = attention_timing.time_ms, attention_tables.mma_limit


# (label, switches): the default path's forms (QSA_ATTN_BWD unset: choose_backward's fused kernel).
# "default" is whatever the runner dispatches (the kernels column names it: kvwg2a3 at the
# prefill shape since session 14); kv16s is the split kernel by name (QSA_ATTN_KV_MMA=bf16s).
# dp=2 (session 10): dO in two bf16 parts for dP, the default candidate; the prefill times the
# default again last ("default again") so that drift over the run shows beside the forms.
WG2A3 = {"QSA_ATTN_KV_MMA": "wg2a", "QSA_ATTN_KV_DP_PARTS": "3"}
ALL_FORMS = [("default", {}), ("kv16s kv16s", {"QSA_ATTN_KV_MMA": "bf16s"}), ("nc kv16sc", {"QSA_ATTN_KV_LAYOUT": "nc"}),
             ("ps=1 kv16sp1", {"QSA_ATTN_KV_PS_PARTS": "1"}), ("dp=2 kv16sp2", {"QSA_ATTN_KV_DP_PARTS": "2"}),
             ("wg kvwg", {"QSA_ATTN_KV_MMA": "wg"}), ("wgp kvwgp", {"QSA_ATTN_KV_MMA": "wgp"}),
             ("wg2 kvwg2", {"QSA_ATTN_KV_MMA": "wg2"}), ("wg2a kvwg2a", {"QSA_ATTN_KV_MMA": "wg2a"}),
             ("wg2a3 kvwg2a3", WG2A3)]
# Query ranges (QSA_ATTN_KV_QCHUNK=<tokens>, src/dispatch/attention_kv_qchunk.rs) on kvwg2a3: the CTAs
# resident together add dQ into one range's rows; qN: ranges of N tokens.
# (Unset, the wgmma forms take KV_WG_DEFAULT_QCHUNK's ranges where q_len is longer; qoff: none.)
ALL_FORMS += [(f"q{n} kvwg2a3 over {n}-token ranges", {**WG2A3, "QSA_ATTN_KV_QCHUNK": str(n)})
              for n in (256, 512, 1024, 2048, 4096, 8192)]
ALL_FORMS += [("qoff kvwg2a3 without ranges", {**WG2A3, "QSA_ATTN_KV_QCHUNK": "off"})]
# dO given as bf16 (`do_dtype=bf16`, fla's input; not a switch but the shape's field, which
# qsa_bwd takes out of the set): the default path reads it natively (kvwg2ab: one dP product,
# no split); bf16do-kv16s widens it first for the split kernel.
ALL_FORMS += [("bf16do kvwg2ab, dO given as bf16", {"do_dtype": "bf16"}),
              ("bf16do-kv16s kv16s, dO widened", {"do_dtype": "bf16", "QSA_ATTN_KV_MMA": "bf16s"})]
FORMS = ALL_FORMS  # main() narrows it to --forms (the first word of each label)
REPEAT = ("default again", {})
# name, batch, T, hq, hkv, t
ERR_CASES = [("g16 T=1024", 1, 1024, 16, 1, 16), ("g16 T=2048 64/4 heads", 1, 2048, 64, 4, 16)]


def fla_bwd(P):
    """fla's parallel_nsa forward + backward on P (bf16 q / k / v / dO): (dq, dk, dv) as f32."""
    import torch
    from fla.ops.nsa.parallel import ParallelNSAFunction

    qf = P["q"].clone().requires_grad_(True)
    kf = P["k"].clone().requires_grad_(True)
    vf = P["v"].clone().requires_grad_(True)
    o = ParallelNSAFunction.apply(qf, kf, vf, P["ids"].long(), P["t"], avt.BLK, P["scale"], None)
    g = torch.autograd.grad(o, (qf, kf, vf), P["do"].to(torch.bfloat16), retain_graph=True)
    return [x.float().reshape(-1) for x in g], (qf, kf, vf, o)


def qsa_bwd(qsa, P, sw):
    import torch

    rows = P["batch"] * P["q_len"] * P["hq"]
    o = torch.empty(rows * avt.D, device="cuda")
    lse = torch.empty(rows, device="cuda")
    dq = torch.empty(rows * avt.D, device="cuda")
    dk = torch.empty(P["k"].numel(), device="cuda")
    dv = torch.empty(P["v"].numel(), device="cuda")
    sw = dict(sw)
    plan = qsa.plan(avt.shape_of(P), True, sw=sw, do_dtype=sw.pop("do_dtype", None))
    call = qsa.bwd(P, o, lse, dq, dk, dv, plan)
    call.setup()
    return call, plan, (dq, dk, dv)


def kernel_of(plan):
    return "+".join(s["kernel"].removeprefix("qsa_attn_") for s in plan["call"] if "kernel" in s)


def errors(qsa, limit, log):
    import torch

    lines = ["| case | form | kernels | dq rel max | dk rel max | dv rel max | gate |", "|---|---|---|---|---|---|---|"]
    for ci, (name, B, T, hq, hkv, t) in enumerate(ERR_CASES):
        P = avt.make_problem(B, T, T, hq, hkv, t, "bf16", seed=300 + ci, ids_kind="distinct")
        P["do"] = P["do"].to(torch.bfloat16).float()  # the same exact dO for fla and qsa
        R = avt.reference(P)
        scale = {n: R[n].abs().max().item() for n in ("dq", "dk", "dv")}

        def row(label, kern, grads):
            rel = [avt.err(x, R[n])[0] / scale[n] for n, x in zip(("dq", "dk", "dv"), grads)]
            gate = "pass" if all(r <= limit for r in rel) else "over"
            lines.append(f"| {name} | {label} | {kern} | " + " | ".join(f"{r:.2e}" for r in rel) + f" | {gate} |")
            print(lines[-1], flush=True)  # as it goes: a later fault keeps the rows before it

        for label, sw in FORMS:
            call, plan, grads = qsa_bwd(qsa, P, sw)
            call()
            torch.cuda.synchronize()
            row(label, kernel_of(plan), grads)
            del call
        try:
            g, keep = fla_bwd(P)
            row("fla parallel_nsa", "fla", g)
            del g, keep
        except Exception as e:  # report, never hide
            lines.append(f"| {name} | fla parallel_nsa | failed: {type(e).__name__}: {e} | - | - | - | - |")
        del P, R
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    log(text)
    return text


def prefill(qsa, log):
    import torch

    P = avt.make_problem(*PREFILL, "bf16", seed=9, ids_kind="distinct")
    P["do"] = P["do"].to(torch.bfloat16).float()  # fla's dO: the bf16do forms' diffs are then 0-ish
    lines = ["| row | median ms | min | max | vs fla | kernels; max abs diff from the default (dq, dk, dv) |",
             "|---|---|---|---|---|---|"]
    fla_ms = None
    try:
        _, (qf, kf, vf, o_fla) = fla_bwd(P)
        do_b = P["do"].to(torch.bfloat16)
        t = avt.time_ms(lambda: torch.autograd.grad(o_fla, (qf, kf, vf), do_b, retain_graph=True), warmup=1, reps=5)
        fla_ms = t[0]
        lines.append(f"| fla parallel_nsa bwd | {t[0]:.2f} | {t[1]:.2f} | {t[2]:.2f} | 1.00 | autograd.grad |")
        del qf, kf, vf, o_fla
        torch.cuda.empty_cache()
    except Exception as e:
        lines.append(f"| fla | - | - | - | - | failed: {type(e).__name__}: {e} |")
    base = None
    for label, sw in FORMS + [REPEAT]:
        call, plan, grads = qsa_bwd(qsa, P, sw)
        t = avt.time_ms(call, warmup=1, reps=5)
        call()
        torch.cuda.synchronize()
        if base is None:
            base = [x.clone() for x in grads]
            diff = "-"
        else:
            diff = ", ".join(f"{(x - b).abs().max().item():.1e}" for x, b in zip(grads, base))
        vs = f"{t[0] / fla_ms:.2f}" if fla_ms else "-"
        lines.append(f"| qsa bwd {label} | {t[0]:.2f} | {t[1]:.2f} | {t[2]:.2f} | {vs} | {kernel_of(plan)}; {diff} |")
        print(lines[-1], flush=True)
        del call, grads
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    log(text)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", default="build/kernels/sm_90")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--skip-prefill", action="store_true")
    ap.add_argument("--forms", default="default,wg,wgp",
                    help="comma-separated first words of the forms' labels: " + ",".join(l.split()[0] for l, _ in ALL_FORMS))
    qsa_plan.add_plan_args(ap)
    a = ap.parse_args()
    global FORMS
    words = a.forms.split(",")
    FORMS = [f for f in ALL_FORMS if f[0].split()[0] in words]
    if len(FORMS) != len(words) or FORMS[0][0].split()[0] != "default":
        ap.error(f"--forms {a.forms}: known {','.join(l.split()[0] for l, _ in ALL_FORMS)}, 'default' first")
    planner = qsa_plan.Planner(a.qsa, a.target, a.matrix)
    if a.plan_only:  # the prefill case's backward plans, one per form (no GPU)
        shape = avt.bench_shape(4, 16384, 16384, 64, 4)
        q = avt.Qsa(planner, None)
        return qsa_plan.plan_only(((f"prefill bwd {label}", q.plan(shape, True, sw={k: v for k, v in sw.items() if k != "do_dtype"},
                                                                do_dtype=sw.get("do_dtype")))
                                   for label, sw in FORMS), sys.stdout)
    import torch

    load_torch_side()
    qsa = avt.Qsa(planner, qsa_plan.CupyLauncher(a.kernels))
    head = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {torch.cuda.get_device_name(0)}"
    out = [f"# fused backward forms vs fla ({head})", "", "## errors vs FP64", ""]
    if not a.skip_prefill:
        tune_fla_at_the_prefill_shape(lambda s: print(s, flush=True))
    out.append(errors(qsa, avt.mma_limit(a.matrix), lambda s: print(s, flush=True)))
    if not a.skip_prefill:
        out += ["", "## prefill B=4 T=16K 64/4 heads 16 blocks", ""]
        out.append(prefill(qsa, lambda s: print(s, flush=True)))
    with open(os.path.join(a.out, "attn_bwd_forms.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The peers bench/attention_vs_torch.py measures qsa against, on the same inputs: torch (gather
the selected K/V rows, then scaled_dot_product_attention) and fla's parallel_nsa.
"""
import torch

from attention_plans import BLK, D
from attention_timing import time_ms


def torch_sel_attn(P, idx, mask):
    """torch: gather the selected K/V rows, then scaled_dot_product_attention per (b, i, g).
    K / V [B, Tk, H, D] (fla's layout), or [B, H, Tk, D] where P["kv_layout"] is "hnd"."""
    B, Tq, H, G = P["batch"], P["q_len"], P["hkv"], P["hq"] // P["hkv"]
    N = B * Tq * H
    hnd = P.get("kv_layout") == "hnd"
    kf = P["k"] if hnd else P["k"].permute(0, 2, 1, 3)  # [B, H, Tk, D]
    vf = P["v"] if hnd else P["v"].permute(0, 2, 1, 3)
    bi = torch.arange(B, device="cuda")[:, None, None, None]
    hi = torch.arange(H, device="cuda")[None, None, :, None]
    ks = kf[bi, hi, idx].reshape(N, 1, -1, D)
    vs = vf[bi, hi, idx].reshape(N, 1, -1, D)
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


def fla_prefill(P, case, add, rows_md):
    """fla's parallel_nsa on the prefill problem P: its forward and backward timed, their rows
    through `add`; returns (forward times, backward times, o). Where fla fails: the reason as a
    row of `rows_md`, o None, and the times measured before the failure (None where none)."""
    fla_f = fla_b = None
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
        return fla_f, fla_b, fla_o
    except Exception as e:  # report, never hide
        print("fla failed:", repr(e), flush=True)
        rows_md.append(f"| {case} | 16 | fla | - | - | - | - | - | failed: {type(e).__name__}: {e} |")
        return fla_f, fla_b, None

"""A selection-attention problem on the GPU (inputs and block lists as the kernels' contract
takes them) and its float64 reference, for bench/attention_vs_torch.py. Shares no code with
the kernels it judges.
"""
import math

import torch

from attention_plans import BLK, D, SCALE


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


def decode_problem(B, Tq, Tk, hq, hkv):
    """A DECODE shape's inputs as the benches time them: bf16, 16 blocks, distinct causal ids,
    seed 7 (the side by side and bench/hbm_floor.py read the same K / V and ids)."""
    return make_problem(B, Tq, Tk, hq, hkv, 16, "bf16", seed=7, ids_kind="distinct")


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


def hnd_of(P):
    """The head-major twin of problem P: the same K / V values, placed [B, H, Tk, D]."""
    return dict(P, k=P["k"].permute(0, 2, 1, 3).contiguous(), v=P["v"].permute(0, 2, 1, 3).contiguous(),
                kv_layout="hnd")

# fla's parallel_nsa forward + backward at the prefill shape, a few times, for ncu.
import torch
from fla.ops.nsa.parallel import ParallelNSAFunction
torch.manual_seed(0)
B, T, HQ, HKV, D, S, BS = 4, 16384, 64, 4, 128, 16, 64
q = torch.randn(B, T, HQ, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k = torch.randn(B, T, HKV, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
v = torch.randn(B, T, HKV, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
pos = torch.arange(T, device="cuda").view(1, T, 1, 1) // BS
ids = (torch.rand(B, T, HKV, S, device="cuda") * (pos + 1)).long().clamp(max=T // BS - 1)
do = torch.randn(B, T, HQ, D, device="cuda", dtype=torch.bfloat16)
for _ in range(2):  # Triton autotunes on the first calls: profile the third only
    o = ParallelNSAFunction.apply(q, k, v, ids, S, BS, D ** -0.5, None)
    torch.autograd.grad(o, (q, k, v), do)
torch.cuda.synchronize()
o = ParallelNSAFunction.apply(q, k, v, ids, S, BS, D ** -0.5, None)
torch.cuda.synchronize()
torch.cuda.profiler.start()
torch.autograd.grad(o, (q, k, v), do)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("fla fwd+bwd ok")

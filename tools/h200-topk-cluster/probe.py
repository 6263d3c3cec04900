"""Development probe for qsa_topk_cluster (kernels/topk.cu), on an sm_90 card with cupy:
time cubins (median of CUDA-event-timed loops of 20 launches, ids checked against numpy)
and print the per-step stamps of a TOPK_CLUSTER_TRACE build. Not a bench: side-by-side
figures come from bench/topk_vs_torch.py. Usage (repository root):

    nvcc -cubin -arch=sm_90 -O3 -Ikernels -DTOPK_CLUSTER_TRACE kernels/topk.cu -o /tmp/tr.cubin
    python3 tools/h200-topk-cluster/probe.py trace=/tmp/tr.cubin \
        empty=build/kernels/sm_90/topk.cubin build/kernels/sm_90/topk.cubin:8

`trace=CUBIN`: stamps of one query (262,144 uniform scores, k = 2048), third launch.
`empty=CUBIN`: the same launch with nq = 0 (every CTA returns at once).
`CUBIN:CLUSTER`: 1 / 3 / 16 queries (a CLUSTER other than 8 needs -DTOPK_CLUSTER=N)."""
import statistics, sys
import cupy as cp
import numpy as np

N, K = 262144, 2048

def run(path, cluster, nq, trace=False, reps=30, inner=20, nq_arg=None):
    mod = cp.RawModule(path=path)
    f = mod.get_function("qsa_topk_cluster")
    part = (N + cluster - 1) // cluster
    shared = part * 4
    f.max_dynamic_shared_size_bytes = shared
    if cluster > 8:
        fn = getattr(f, "kernel", f)
        cp.cuda.driver.funcSetAttribute(fn.ptr, 14, 1)  # NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    rs = np.random.default_rng(1)
    scores = cp.asarray(rs.random((nq, N), dtype=np.float32))
    out = cp.zeros((nq, K), dtype=cp.int32)
    args = (scores, np.int32(N), np.int32(nq if nq_arg is None else nq_arg), np.int32(N), np.int32(K), np.uint64(0), out)
    f((cluster, nq, 1), (1024, 1, 1), args, shared_mem=shared)
    cp.cuda.Device().synchronize()
    if trace:
        for rep in range(3):
            f((cluster, nq, 1), (1024, 1, 1), args, shared_mem=shared)
            cp.cuda.Device().synchronize()
        o = cp.asnumpy(out)[0, : cluster * 16].reshape(cluster, 16)
        for r in range(cluster):
            print(f"  rank {r}: " + " ".join(f"{x/1000:6.2f}" for x in o[r, 1:8]) + " us (staged bound min kept flags select end)")
        return None
    ids = cp.asnumpy(out)
    want = np.sort(np.argsort(-cp.asnumpy(scores), axis=1, kind="stable")[:, :K], axis=1)
    ok = np.array_equal(ids, want)
    times = []
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(reps):
        e0.record()
        for _ in range(inner):
            f((cluster, nq, 1), (1024, 1, 1), args, shared_mem=shared)
        e1.record(); e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / inner)
    return statistics.median(times), ok

for spec in sys.argv[1:]:
    if spec.startswith("trace="):
        print(f"{spec} 1 query, stamps (third launch):")
        run(spec[6:], 8, 1, trace=True)
        continue
    if spec.startswith("empty="):
        t, _ = run(spec[6:], 8, 1, nq_arg=0)
        print(f"empty launch (every CTA returns at once): {t:.1f} us")
        continue
    path, cluster = spec.split(":")[0], int(spec.split(":")[1])
    row = []
    for nq in (1, 3, 16):
        t, ok = run(path, cluster, nq)
        row.append(f"{nq}q {t:6.1f} us{'' if ok else ' WRONG'}")
    print(f"{path} cluster {cluster}: " + " | ".join(row))

"""Development probe for the split top-k (qsa_topk_split_bound + qsa_topk_split_select,
kernels/topk.cu) on an sm_90 card with cupy: time cubins (median of CUDA-event-timed loops
of 20 launch pairs, ids checked against numpy) and print the per-step globaltimer stamps of
a TOPK_SPLIT_TRACE build. Not a bench: side-by-side figures come from bench/topk_vs_torch.py,
whose launches are the runner's plans. The launch here mirrors src/gpu/topk.rs by hand
(grid (m, nq), 512 threads, workspace words) because a probe must also run cubins built with
development macros that the runner never loads. Usage (repository root):

    nvcc -cubin -arch=sm_90 -O3 -Ikernels -DTOPK_SPLIT_TRACE kernels/topk.cu -o /tmp/tr.cubin
    python3 tools/h200-topk-split/probe.py trace=/tmp/tr.cubin build/kernels/sm_90/topk.cubin

`trace=CUBIN`: stamps of query 0 (262,144 scores, k = 2048) for 1 / 3 / 16 queries.
`CUBIN[:CHUNK:THREADS]`: times for 1 / 3 / 16 queries (a build with -DTOPK_SPLIT_CHUNK=CHUNK
-DTOPK_SPLIT_THREADS=THREADS).  `spec=CUBIN[:CHUNK:THREADS]`: the one-launch qsa_topk_spec instead.
`spectrace=CUBIN`: the stamps of qsa_topk_spec.
`dist=normal|uniform|ascending` before them picks the scores."""
import statistics, sys
import cupy as cp
import numpy as np

N, K = 262144, 2048
DIST = "uniform"
SPEC = False  # spec=CUBIN: the speculative one-launch kernel qsa_topk_spec


def scores_for(nq):
    rs = np.random.default_rng(1)
    if DIST == "ascending":
        return cp.asarray(np.tile(np.arange(N, dtype=np.float32), (nq, 1)))
    x = rs.random((nq, N), dtype=np.float32) if DIST == "uniform" else rs.standard_normal((nq, N), dtype=np.float32)
    return cp.asarray(x)


def launcher(spec, nq):
    path, *geo = spec.split(":")
    CHUNK, THREADS = (int(geo[0]), int(geo[1])) if geo else (4096, 512)
    mod = cp.RawModule(path=path)
    fa, fb = mod.get_function("qsa_topk_split_bound"), mod.get_function("qsa_topk_split_select")
    m = (N + CHUNK - 1) // CHUNK
    kc = min(K, CHUNK)
    ws = cp.zeros(nq + 2 * nq * m + 2 * nq * m * kc, dtype=cp.uint32)
    scores = scores_for(nq)
    out = cp.zeros((nq, K), dtype=cp.int32)
    a = (scores, np.int32(N), np.int32(nq), np.int32(N), np.int32(K), ws)

    if SPEC:
        fs = mod.get_function("qsa_topk_spec")

        def go():
            fs((m, nq, 1), (THREADS, 1, 1), a + (out,))
        return mod, go, scores, out, m

    def go():
        fa((m, nq, 1), (THREADS, 1, 1), a)
        fb((m, nq, 1), (THREADS, 1, 1), a + (out,))

    return mod, go, scores, out, m


def check(scores, out):
    want = np.sort(np.argsort(-cp.asnumpy(scores), axis=1, kind="stable")[:, :K], axis=1)
    return np.array_equal(cp.asnumpy(out), want)


def timed(path, nq, reps=30, inner=20):
    _, go, scores, out, _ = launcher(path, nq)
    go()
    cp.cuda.Device().synchronize()
    ok = check(scores, out)
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        e0.record()
        for _ in range(inner):
            go()
        e1.record()
        e1.synchronize()
        times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / inner)
    return statistics.median(times), ok


def trace(path, nq):
    mod, go, scores, out, m = launcher(path, nq)
    for _ in range(4):
        go()
    cp.cuda.Device().synchronize()
    ok = check(scores, out)
    ptr = mod.get_global("topk_split_trace")
    t = cp.ndarray((3, 256, 8), dtype=cp.uint64, memptr=ptr).get().astype(np.int64)
    t0 = t[1, :m, 0].min() if SPEC else t[0, :m, 0].min()
    us = lambda x: (x - t0) / 1000.0
    a, b = t[0, :m], t[1, :m]
    print(f"  {nq} queries, query 0, ids {'ok' if ok else 'WRONG'}; microseconds from the first stage-A CTA's start:")
    if not SPEC:
      print(f"  stage A start  min {us(a[:,0].min()):6.2f} max {us(a[:,0].max()):6.2f}")
      print(f"  stage A loaded min {us(a[:,1].min()):6.2f} max {us(a[:,1].max()):6.2f}")
      print(f"  stage A end    min {us(a[:,2].min()):6.2f} max {us(a[:,2].max()):6.2f}")
    for j, name in enumerate(["start", "loaded", "X known", "emitted", "ticket"]):
        print(f"  stage B {name:8s} min {us(b[:,j].min()):6.2f} max {us(b[:,j].max()):6.2f}")
    f = t[2, 0]
    for j, name in [(0, "final start"), (1, "offsets"), (2, "cands loaded"), (3, "lo/hi"), (4, "radix"), (5, "compact"), (7, "end")]:
        print(f"  {name:14s} {us(f[j]):6.2f}")
    print(f"  final: first digit {t[2,1,0]}, candidates {t[2,1,1]}")


args = sys.argv[1:]
for spec in args:
    if spec.startswith("dist="):
        DIST = spec[5:]
        print(f"scores: {DIST}")
    elif spec.startswith("spec="):
        SPEC = True
        row = []
        for nq in (1, 3, 16):
            t, ok = timed(spec[5:], nq)
            row.append(f"{nq}q {t:6.1f} us{'' if ok else ' WRONG'}")
        print(f"{spec}: " + " | ".join(row))
        SPEC = False
    elif spec.startswith("spectrace="):
        SPEC = True
        print(f"{spec} (qsa_topk_spec; stage B rows are its chunks):")
        for nq in (1, 3, 16):
            trace(spec[10:], nq)
        SPEC = False
    elif spec.startswith("trace="):
        print(f"{spec}:")
        for nq in (1, 3, 16):
            trace(spec[6:], nq)
    else:
        row = []
        for nq in (1, 3, 16):
            t, ok = timed(spec, nq)
            row.append(f"{nq}q {t:6.1f} us{'' if ok else ' WRONG'}")
        print(f"{spec}: " + " | ".join(row))

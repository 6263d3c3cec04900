"""GPU timings for bench/attention_vs_torch.py: CUDA events around calls, or calls replayed from
one CUDA graph (no Python launch overhead), optionally with the L2 flushed before each.
"""
import torch


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

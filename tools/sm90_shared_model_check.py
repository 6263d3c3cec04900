# Which static-shared figure does the CUDA driver count for occupancy on sm_90?
# cuobjdump says SHARED:2080 for qsa_probe_histogram, ptxas "1056 bytes smem": the binary's
# section includes 1 KiB the compiler reserves. xtask/src/occupancy.rs assumes
# per-block = binary static + dynamic + 1024 (reserved_shared_per_block), rounded to 128.
# Run on the H200 (carry build/kernels/sm_90): prints the driver's answer next to 3 models.
# Result 2026-11-30 (docs/results/sm_90-shared-model-check-2026-11-30.txt): the driver counts
# the binary's static figure + dynamic (model C), so matrix.yaml sets sm_90's
# reserved_shared_per_block to 0.
import cupy as cp
from cupy.cuda import driver as drv, runtime as rt
SM = 233472
mod = cp.RawModule(path="build/kernels/sm_90/probe.cubin")
print("reserved smem per block (dev attr 111):", rt.deviceGetAttribute(111, 0))
for name, binary, ptxas in [("qsa_probe_histogram", 2080, 1056), ("qsa_probe_scan", 1088, 64)]:
    f = mod.get_function(name)
    print(name, "SHARED_SIZE_BYTES", drv.funcGetAttribute(1, f.kernel.ptr), "NUM_REGS", drv.funcGetAttribute(4, f.kernel.ptr),
          "MAX_THREADS", drv.funcGetAttribute(0, f.kernel.ptr), "LOCAL", drv.funcGetAttribute(3, f.kernel.ptr))
    drv.funcSetAttribute(f.kernel.ptr, 8, SM - 1024 - binary)  # max dynamic shared
    r = lambda x: -(-x // 128) * 128
    diffs = 0
    for dyn in range(0, SM - 1024 - binary + 1, 256):
        got = drv.occupancyMaxActiveBlocksPerMultiprocessor(f.kernel.ptr, 32, dyn)
        a = min(32, SM // r(binary + dyn + 1024)); b = min(32, SM // r(ptxas + dyn + 1024)); c = min(32, SM // r(binary + dyn))
        if not (got == a == b == c):
            diffs += 1
            if diffs <= 12: print(f"  dyn {dyn}: driver {got}  A(binary+1K) {a}  B(ptxas+1K) {b}  C(binary) {c}")
    print("  rows where models disagree:", diffs)

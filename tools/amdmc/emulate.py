#!/usr/bin/env python3
"""CPU emulation of block_scores_wmma_bf16 (gfx12) / block_scores_mfma_bf16 (gfx950).

No AMD GPU exists here, so the kernels' lane mapping is checked by running the kernel's own
index arithmetic (amc_body in kernels/common/scores_amd_mc.h, transcribed statement by statement)
on emulated waves whose matrix instruction is a reference MMA built from the DOCUMENTED
operand / accumulator layouts. Constants (AMC_NT per arch, AMC_QPC, the host's AMC_* and
THREADS) are read from the sources, so a change there is seen here.

What a pass proves (for the shapes below and both archs):
  * the grid of src/gpu/scores/plan.rs covers every (query, block) and the kernel stores each
    exactly once, never outside S, and never reads outside Q / Kb / w;
  * with the documented layouts, every product Q[q,h,k] * Kb[b,k] meets its partner once
    (a dot sums all 128 k), every row's weight and query are the right ones, padded rows
    and blocks add nothing: S matches an FP64 reference on the bf16-rounded inputs;
  * the k-slot assignment is irrelevant as long as A and B share it (run with a random
    permutation of the hardware k per MMA);
  * the checker has teeth: a transposed accumulator layout, A/B k slots that disagree, or
    an off-by-one group in the epilogue all fail (negative controls).
What it cannot prove: that the hardware really uses these layouts (A row = lane % 16,
B column = lane % 16, A and B placing k alike, C element i of lane l at row
(16/G)*(l/16) + i, column l % 16), that the builtins lower to the instructions meant,
bf16 rounding / f32 accumulation details of the matrix unit (the reference accumulates in
FP64), EXEC / hazard rules, or anything about speed. Those need an AMD runner.

Usage: python3 tools/amdmc/emulate.py   (exit status 0 = every check passed)
"""
import math
import random
import re
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAD_DIM = 128


# --- constants from the sources --------------------------------------------------------
def read_constants():
    cu = (ROOT / "kernels/common/scores_amd_mc.h").read_text()
    rs = (ROOT / "src/gpu/scores/plan.rs").read_text()
    m = re.search(r"#if defined\(__gfx950__\)\s*#define AMC_NT (\d+)\s*#else\s*#define AMC_NT (\d+)", cu)
    assert m, "AMC_NT block not found in kernels/common/scores_amd_mc.h"
    nt_mfma, nt_wmma = int(m.group(1)), int(m.group(2))
    qpc = int(re.search(r"#define AMC_QPC (\d+)", cu).group(1))

    def rs_const(name):
        return int(re.search(rf"const {name}: \w+ = (\d+);", rs).group(1))

    host = dict(wmma=rs_const("AMC_WMMA_NT"), mfma=rs_const("AMC_MFMA_NT"), qpc=rs_const("AMC_QPC"),
                threads=rs_const("THREADS"))
    assert host["wmma"] == nt_wmma, f"host AMC_WMMA_NT {host['wmma']} != kernel {nt_wmma}"
    assert host["mfma"] == nt_mfma, f"host AMC_MFMA_NT {host['mfma']} != kernel {nt_mfma}"
    assert host["qpc"] == qpc, f"host AMC_QPC {host['qpc']} != kernel {qpc}"
    assert "constexpr int WAVES = 256 / QSA_WAVE;" in cu and host["threads"] == 256
    return dict(wmma=nt_wmma, mfma=nt_mfma, qpc=qpc)


# --- numbers ---------------------------------------------------------------------------
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bf16(x):
    """f32 -> bf16 (round to nearest even, NaN stays NaN), returned as a float."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    if (u & 0x7F800000) == 0x7F800000 and (u & 0x7FFFFF):
        return float("nan")
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def relu(x):
    return x if x > 0.0 else 0.0  # fmaxf(x, 0): NaN -> 0


def fmaf(a, b, c):
    return f32(a * b + c)  # the product of two f32 is exact in f64; one rounding to f32


# --- the hardware model (documented layouts) --------------------------------------------
class Arch:
    def __init__(self, name, wave, nt, kperm=None, c_transposed=False):
        self.name, self.wave, self.nt = name, wave, nt
        self.g = wave // 16  # lane groups
        self.kstep = 8 * self.g
        self.crows = 16 // self.g
        # hardware k of operand slot (g, e): documented as 8g + e; any bijection shared by
        # A and B must give the same result (kperm: a random one).
        self.kmap = kperm or {(g, e): 8 * g + e for g in range(self.g) for e in range(8)}
        self.kmap_b = self.kmap
        self.c_transposed = c_transposed

    def c_pos(self, lane, i):
        """(row m, column n) of accumulator element i of `lane`."""
        g, r = lane // 16, lane % 16
        if self.c_transposed:  # negative control: rows and columns swapped
            return r, self.crows * g + i
        return self.crows * g + i, r

    def mma(self, a, b, c):
        """D = A B + C for one wave. a, b: [lane][8] operand slots; c: [lane][crows]."""
        A = [[None] * self.kstep for _ in range(16)]
        B = [[None] * 16 for _ in range(self.kstep)]
        for lane in range(self.wave):
            g, r = lane // 16, lane % 16
            for e in range(8):
                ka, kb_ = self.kmap[(g, e)], self.kmap_b[(g, e)]
                assert A[r][ka] is None and B[kb_][r] is None, "operand slot written twice"
                A[r][ka] = a[lane][e]
                B[kb_][r] = b[lane][e]
        assert all(v is not None for row in A for v in row) and all(v is not None for row in B for v in row)
        out = [list(x) for x in c]
        seen = set()
        for lane in range(self.wave):
            for i in range(self.crows):
                m, n = self.c_pos(lane, i)
                assert (m, n) not in seen, "accumulator element mapped twice"
                seen.add((m, n))
                out[lane][i] = c[lane][i] + math.fsum(A[m][k] * B[k][n] for k in range(self.kstep))
        assert len(seen) == 256
        return out


# --- memory with bounds and store accounting --------------------------------------------
class Mem:
    def __init__(self, name, data):
        self.name, self.data = name, data

    def read(self, i):
        if not 0 <= i < len(self.data):
            raise IndexError(f"{self.name}[{i}] read out of range (len {len(self.data)})")
        return self.data[i]


class Out:
    def __init__(self, n):
        self.data = [None] * n
        self.writes = [0] * n

    def write(self, i, v):
        if not 0 <= i < len(self.data):
            raise IndexError(f"S[{i}] written out of range (len {len(self.data)})")
        self.writes[i] += 1
        self.data[i] = v


# --- the kernel, transcribed from amc_body ------------------------------------------------
def amc_load8(mem, base, ok):
    if not ok:
        return [0.0] * 8
    return [bf16(mem.read(base + e)) for e in range(8)]


def run_kernel(arch, qpc, q, kb, w, s, nq, heads, blocks, grid, epi_group_shift=0):
    WAVES = 256 // arch.wave
    G, KSTEP, CROWS, NT, W = arch.g, arch.kstep, arch.crows, arch.nt, arch.wave
    KSTEPS = HEAD_DIM // KSTEP
    for by in range(grid[1]):
        for bx in range(grid[0]):
            for wave in range(WAVES):
                wb0 = (bx * WAVES + wave) * (NT * 16)
                if wb0 >= blocks:
                    continue
                lanes = range(W)
                # B fragments, resident: bf[lane][nt][ks]
                bf = [[[None] * KSTEPS for _ in range(NT)] for _ in lanes]
                for lane in lanes:
                    r, g = lane % 16, lane // 16
                    for nt in range(NT):
                        b = wb0 + nt * 16 + r
                        ok = b < blocks
                        brow = (b if ok else 0) * HEAD_DIM + 8 * g
                        for ks in range(KSTEPS):
                            bf[lane][nt][ks] = amc_load8(kb, brow + ks * KSTEP, ok)
                mtq = (heads + 15) // 16
                q0 = by * qpc
                qend = min(nq, q0 + qpc)
                for qq in range(q0, qend):
                    qrow = qq * heads * HEAD_DIM
                    wrow = qq * heads
                    out = [[0.0] * NT for _ in lanes]
                    for mt in range(mtq):
                        acc = [[[0.0] * CROWS for _ in lanes] for _ in range(NT)]  # acc[nt][lane][i]
                        a_of = []
                        for lane in lanes:
                            r, g = lane % 16, lane // 16
                            ha = mt * 16 + r
                            aok = ha < heads
                            a_of.append(((ha if aok else 0) * HEAD_DIM + 8 * g + qrow, aok))
                        for ks in range(KSTEPS):
                            a = [amc_load8(q, base + ks * KSTEP, ok) for (base, ok) in a_of]
                            for nt in range(NT):
                                acc[nt] = arch.mma(a, [bf[lane][nt][ks] for lane in lanes], acc[nt])
                        for lane in lanes:
                            g = (lane // 16 + epi_group_shift) % G
                            for i in range(CROWS):
                                h = mt * 16 + CROWS * g + i
                                wv = w.read(wrow + h) if h < heads else 0.0
                                for nt in range(NT):
                                    out[lane][nt] = fmaf(wv, relu(f32(acc[nt][lane][i])), out[lane][nt])
                    o = 16
                    while o < W:
                        out = [[f32(out[lane][nt] + out[lane ^ o][nt]) for nt in range(NT)] for lane in lanes]
                        o <<= 1
                    for lane in lanes:
                        r, g = lane % 16, lane // 16
                        if g == 0:
                            for nt in range(NT):
                                b = wb0 + nt * 16 + r
                                if b < blocks:
                                    s.write(qq * blocks + b, out[lane][nt])


def plan_grid(arch, qpc, nq, blocks):
    """src/gpu/scores/plan.rs, ScoresKernel::AmdMatrixBf16 arm."""
    per_cta = (256 // arch.wave) * arch.nt * 16
    return (-(-blocks // per_cta), -(-nq // qpc))


def reference(qv, kv, wv, nq, heads, blocks):
    """FP64 S on the bf16-rounded Q and Kb (w stays f32, as in the kernel)."""
    qb = [bf16(x) for x in qv]
    kbb = [bf16(x) for x in kv]
    s = []
    for qq in range(nq):
        for b in range(blocks):
            tot = 0.0
            for h in range(heads):
                base = (qq * heads + h) * HEAD_DIM
                d = math.fsum(qb[base + k] * kbb[b * HEAD_DIM + k] for k in range(HEAD_DIM))
                tot += wv[qq * heads + h] * relu(d)
            s.append(tot)
    return s


def check(arch, qpc, nq, heads, blocks, rng, epi_group_shift=0, quiet=False):
    qv = [f32(rng.gauss(0, 1)) for _ in range(nq * heads * HEAD_DIM)]
    kv = [f32(rng.gauss(0, 1)) for _ in range(blocks * HEAD_DIM)]
    wv = [f32(rng.uniform(-1, 1)) for _ in range(nq * heads)]
    s = Out(nq * blocks)
    grid = plan_grid(arch, qpc, nq, blocks)
    run_kernel(arch, qpc, Mem("Q", qv), Mem("Kb", kv), Mem("w", wv), s, nq, heads, blocks, grid,
               epi_group_shift)
    bad_writes = [i for i, c in enumerate(s.writes) if c != 1]
    if bad_writes:
        return f"{len(bad_writes)} outputs written != 1 times (first: index {bad_writes[0]}, {s.writes[bad_writes[0]]}x)"
    ref = reference(qv, kv, wv, nq, heads, blocks)
    scale = max(1.0, max(abs(x) for x in ref))
    # Only summation order differs (the emulated MMA sums exactly, the epilogue rounds to
    # f32 like the kernel): a wrong index moves results by O(scale), rounding by ~1e-6.
    worst = max(abs(a - b) for a, b in zip(s.data, ref)) / scale
    if worst > 1e-5:
        return f"max |S - ref| / max|ref| = {worst:.3g}"
    if not quiet:
        print(f"  ok  {arch.name:5} nq={nq:3} heads={heads:3} blocks={blocks:4} grid={grid} "
              f"rel.err={worst:.2g}")
    return None


def main():
    consts = read_constants()
    qpc = consts["qpc"]
    rng = random.Random(20261130)
    archs = [Arch("wmma", 32, consts["wmma"]), Arch("mfma", 64, consts["mfma"])]
    # Shapes: ragged everything; heads at and around m-tile edges; more queries than one
    # CTA row; blocks past one CTA and one wave; decode.
    shapes = [(9, 7, 77), (1, 16, 1), (3, 17, 40), (2, 33, 33), (17, 5, 19), (1, 64, 70),
              (8, 3, 257), (1, 200, 18), (10, 1, 129)]
    failures = 0
    for arch in archs:
        print(f"{arch.name}: wave {arch.wave}, NT {arch.nt}, QPC {qpc}, k step {arch.kstep}")
        for nq, heads, blocks in shapes:
            err = check(arch, qpc, nq, heads, blocks, rng)
            if err:
                failures += 1
                print(f"  FAIL {arch.name} nq={nq} heads={heads} blocks={blocks}: {err}")
        # The k slots of the hardware may be any bijection, as long as A and B share it.
        slots = [(g, e) for g in range(arch.g) for e in range(8)]
        ks = list(range(arch.kstep))
        rng.shuffle(ks)
        perm = Arch(arch.name + "~k", arch.wave, arch.nt, kperm=dict(zip(slots, ks)))
        err = check(perm, qpc, 9, 7, 77, rng)
        if err:
            failures += 1
            print(f"  FAIL permuted k: {err}")

        # Negative controls: each must be caught.
        controls = []
        controls.append(("C transposed", Arch(arch.name, arch.wave, arch.nt, c_transposed=True), 0))
        mism = Arch(arch.name, arch.wave, arch.nt)
        mism.kmap_b = {(g, e): 8 * g + (7 - e) for g in range(arch.g) for e in range(8)}
        controls.append(("A/B k slots disagree", mism, 0))
        controls.append(("epilogue row group off by one", Arch(arch.name, arch.wave, arch.nt), 1))
        for what, a, shift in controls:
            err = check(a, qpc, 9, 20, 40, rng, epi_group_shift=shift, quiet=True)
            if err is None:
                failures += 1
                print(f"  FAIL negative control not caught: {what}")
            else:
                print(f"  ok  negative control caught: {what}: {err}")
    if failures:
        print(f"{failures} FAILED")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

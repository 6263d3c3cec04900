#!/usr/bin/env python3
"""Build FlashInfer's top-k module here (no GPU) and assemble `.flashinfer/`, the folder the
H200 carries to run it offline as a peer in bench/topk_vs_torch.py (`--flashinfer .flashinfer`).

Why: on the device `flashinfer.top_k` JIT-compiles its module on first call (4 CUDA sources,
CUB's batched top-k among them) and that did not finish in 7.7 minutes; the device has no
network either. Here: PyPI, nvcc 13.0 (.venv-cuda), 2 cores, no GPU.

What it does (every step cached under --work, default /tmp/flashinfer-carry):
  1. pip download the pinned wheels: flashinfer-python, apache-tvm-ffi for CPython 3.10-3.14
     (the device's Python version is not recorded anywhere; only tvm-ffi's Cython core differs
     between them), nvidia-ml-py and packaging (imported by flashinfer.utils / jit.cpp_ext;
     torch brings filelock, numpy is on the device).
  2. a throwaway venv with PyPI's torch (flashinfer's jit imports torch; no GPU needed), ninja,
     filelock, tvm-ffi.
  3. extract flashinfer with its package __init__ files reduced to nothing (the real ones
     import every kernel family and their dependencies: requests, cutlass-dsl, ...), and build
     the `topk` JIT spec with FLASHINFER_CUDA_ARCH_LIST=9.0 (flashinfer turns it into sm_90a).
     nvcc is .venv-cuda's; curand.h comes from the venv's nvidia/cu13 (torch's CUDA wheels);
     -lcuda links an empty stub whose soname is libcuda.so.1 (topk.so ends up not needing it).
     Cold, here: 32 min wall, 19 CPU-min (docs/results/side-by-side/flashinfer-topk.md).
  4. assemble OUT (default .flashinfer/):
       site/flashinfer/...            the modules `import flashinfer.topk` loads, nothing else
       site/flashinfer/data/aot/topk/topk.so
                                      the built module, where flashinfer looks for AOT modules
                                      (jit/env.py: FLASHINFER_AOT_DIR), so no JIT is attempted
       site/tvm_ffi/                  python files, lib/libtvm_ffi*.so, core.cpython-3XX*.so
       site/pynvml.py, site/packaging/
       MANIFEST.txt                   versions, flags, build seconds, sizes
Run from the repository root: python3 tools/flashinfer-carry/assemble.py
"""
import argparse
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

FLASHINFER = "flashinfer-python==0.7.4"
TVM_FFI = "apache-tvm-ffi==0.1.15.post2"  # flashinfer 0.7.4 needs >=0.1.11,<0.2
TORCH = "torch==2.11.0"  # the device's torch (2.11.0+cu130); only for flashinfer's imports
PURE = ["nvidia-ml-py==13.615.71", "packaging==26.4"]
PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]
ARCH = "9.0"
LIMIT_MIB = 40  # the task's budget for this folder (the device carries 64 MiB in all)

ROOT = Path(__file__).resolve().parents[2]
NVCC_HOME = ROOT / ".venv-cuda/lib/python3.11/site-packages/nvidia/cu13"


def run(argv, **kw):
    print("+", " ".join(str(a) for a in argv), flush=True)
    subprocess.run([str(a) for a in argv], check=True, **kw)


def fetch(work):
    """Step 1: the wheels."""
    wheels = work / "wheels"
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", wheels]
    run(pip + [FLASHINFER] + PURE)  # files already there are not fetched again
    for py in PYTHONS:
        run(pip + ["--only-binary=:all:", "--python-version", py,
                   "--platform", "manylinux_2_28_x86_64", TVM_FFI])
    return wheels


def venv(work, wheels):
    """Step 2: the build venv (torch from PyPI, ~4.7 GB with its CUDA wheels)."""
    v = work / "venv"
    py = v / "bin/python"
    if not py.exists():
        run([sys.executable, "-m", "venv", v])
        run([py, "-m", "pip", "install", "--quiet", TORCH, "ninja", "filelock", TVM_FFI] + PURE)
    return py


def extract(work, wheels):
    """Step 3a: flashinfer with its package __init__ files emptied."""
    src = work / "pkg"
    if not (src / "flashinfer").exists():
        with zipfile.ZipFile(next(wheels.glob("flashinfer_python-*.whl"))) as z:
            z.extractall(src)
        stub = '"""Reduced by tools/flashinfer-carry/assemble.py: {}."""\n'
        (src / "flashinfer/__init__.py").write_text(
            stub.format("only flashinfer.topk and what it imports")
            + "from .version import __version__ as __version__\n")
        (src / "flashinfer/jit/__init__.py").write_text(stub.format("what jit.topk imports"))
    return src


def cuda_home(work, venv_py):
    """Step 3b: a CUDA_HOME for flashinfer's ninja file: nvcc from .venv-cuda, headers from
    there plus the venv's nvidia/cu13 (curand.h), libcudart.so and an empty libcuda stub."""
    home = work / "cudahome"
    if home.exists():
        return home
    extra = next((work / "venv/lib").glob("python3*/site-packages/nvidia/cu13"))
    (home / "include").mkdir(parents=True)
    (home / "lib64/stubs").mkdir(parents=True)
    (home / "bin").symlink_to(NVCC_HOME / "bin")
    (home / "nvvm").symlink_to(NVCC_HOME / "nvvm")
    for d in (NVCC_HOME / "include", extra / "include"):
        for f in d.iterdir():
            if not (home / "include" / f.name).exists():
                (home / "include" / f.name).symlink_to(f)
    (home / "lib64/libcudart.so").symlink_to(extra / "lib/libcudart.so.13")
    run(["gcc", "-shared", "-o", home / "lib64/stubs/libcuda.so", "-Wl,-soname,libcuda.so.1",
         "-x", "c", "/dev/null"])
    return home


BUILD = """
import sys, time
t0 = time.time()
from flashinfer.jit.topk import gen_topk_module
spec = gen_topk_module()
spec.build(verbose=True)
print("SO", spec.jit_library_path)
print("SECONDS", round(time.time() - t0, 1))
import flashinfer.topk
print("MODULES", " ".join(m.__file__ for n, m in sorted(sys.modules.items())
                          if n.startswith("flashinfer") and getattr(m, "__file__", None)))
"""


def build(work, venv_py, src, home):
    """Step 3c: the build, timed. Returns (the .so, seconds, files flashinfer.topk imports)."""
    env = dict(os.environ, PYTHONPATH=str(src), CUDA_HOME=str(home), MAX_JOBS="2",
               FLASHINFER_CUDA_ARCH_LIST=ARCH, FLASHINFER_WORKSPACE_BASE=str(work / "ws"),
               PATH=f"{venv_py.parent}:{os.environ['PATH']}")
    out = subprocess.run([venv_py, "-c", BUILD], env=env, text=True, capture_output=True)
    (work / "build.log").write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        sys.exit(f"the topk build failed; log: {work / 'build.log'}\n{out.stderr[-3000:]}")
    lines = dict(l.split(" ", 1) for l in out.stdout.splitlines() if l.split(" ")[0] in
                 ("SO", "SECONDS", "MODULES"))
    return Path(lines["SO"]), float(lines["SECONDS"]), [Path(p) for p in lines["MODULES"].split()]


def assemble(out, wheels, src, so, modules):
    """Step 4: the carry folder."""
    if out.exists():
        shutil.rmtree(out)
    site = out / "site"
    for m in modules:
        rel = m.relative_to(src)
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(m, site / rel)
    aot = site / "flashinfer/data/aot/topk"
    aot.mkdir(parents=True)
    shutil.copy2(so, aot / "topk.so")
    lic = next(src.glob("flashinfer_python-*.dist-info/licenses/LICENSE"), None)
    if lic:
        shutil.copy2(lic, site / "flashinfer/LICENSE")
    # tvm-ffi: one tree, every CPython's core (the rest of the wheels is identical).
    for whl in sorted(wheels.glob("apache_tvm_ffi-*.whl")):
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                # core.*.so needs lib/libtvm_ffi.so and lib/libtvm_ffi_testing.so (NEEDED).
                keep = (name.endswith(".py") or name.startswith("tvm_ffi/lib/lib")
                        or (name.startswith("tvm_ffi/core.") and name.endswith(".so")))
                if name.startswith("tvm_ffi/") and keep and "/testing/" not in name:
                    z.extract(name, site)
    for whl in wheels.glob("*.whl"):
        if whl.name.startswith(("nvidia_ml_py", "packaging")):
            with zipfile.ZipFile(whl) as z:
                z.extractall(site, [n for n in z.namelist() if n == "pynvml.py" or n.startswith("packaging/")])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/flashinfer-carry"))
    ap.add_argument("--out", type=Path, default=ROOT / ".flashinfer")
    args = ap.parse_args()
    if not (NVCC_HOME / "bin/nvcc").exists():
        sys.exit(f"no nvcc at {NVCC_HOME}/bin: run `cargo xtask setup` (it installs .venv-cuda)")
    args.work.mkdir(parents=True, exist_ok=True)
    wheels = fetch(args.work)
    venv_py = venv(args.work, wheels)
    src = extract(args.work, wheels)
    home = cuda_home(args.work, venv_py)
    so, seconds, modules = build(args.work, venv_py, src, home)
    assemble(args.out, wheels, src, so, modules)
    files = [p for p in args.out.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    manifest = [
        f"{FLASHINFER} (topk module built for sm_90a), {TVM_FFI} for CPython {', '.join(PYTHONS)}, "
        f"{', '.join(PURE)}",
        f"built {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by tools/flashinfer-carry/assemble.py "
        f"with nvcc from .venv-cuda (CUDA 13.0), FLASHINFER_CUDA_ARCH_LIST={ARCH}, MAX_JOBS=2: "
        f"this run's build step {seconds:.0f} s (imports included; ninja rebuilds only what changed "
        "in --work, so a warm run is seconds)",
        f"topk.so {so.stat().st_size / 2**20:.1f} MiB; {len(files)} files, {total / 2**20:.1f} MiB in all",
    ]
    (args.out / "MANIFEST.txt").write_text("\n".join(manifest) + "\n")
    print("\n".join(manifest))
    if total > LIMIT_MIB * 2**20:
        sys.exit(f"{args.out} is {total / 2**20:.1f} MiB, over the {LIMIT_MIB} MiB budget")


if __name__ == "__main__":
    main()

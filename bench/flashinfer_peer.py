"""FlashInfer's top-k (`flashinfer.top_k`) as a peer of bench/topk_vs_torch.py, offline.

The device has no network and FlashInfer's JIT build of its top-k module did not finish in
7.7 minutes there, so the module is built here ahead of time by
tools/flashinfer-carry/assemble.py into a folder (`.flashinfer/`, gitignored) that the device
carries: `site/` holds the flashinfer modules `flashinfer.topk` imports, its built module at
flashinfer's AOT path (site/flashinfer/data/aot/topk/topk.so, sm_90a), tvm-ffi (one core per
CPython 3.10-3.14), pynvml and packaging. Nothing is compiled on the device:
FLASHINFER_DISABLE_JIT=1 turns a missing or unloadable module into an error.

Self-check on the device (a few seconds):
    python3 bench/flashinfer_peer.py .flashinfer
"""
import glob
import os
import sys


class FlashInferTopK:
    """`flashinfer.top_k(x, k)` from a carried folder; call it like torch.topk(x, k)."""

    def __init__(self, folder):
        site = os.path.join(folder, "site")
        if not os.path.isfile(os.path.join(site, "flashinfer", "data", "aot", "topk", "topk.so")):
            raise SystemExit(f"--flashinfer {folder}: no site/flashinfer/data/aot/topk/topk.so there; build "
                             "the folder with `python3 tools/flashinfer-carry/assemble.py` and carry .flashinfer")
        tag = f"{sys.version_info.major}{sys.version_info.minor}"
        if not glob.glob(os.path.join(site, "tvm_ffi", f"core.cpython-{tag}-*.so")):
            have = sorted(os.path.basename(p) for p in glob.glob(os.path.join(site, "tvm_ffi", "core.*.so")))
            raise SystemExit(f"--flashinfer {folder}: no tvm-ffi core for CPython {sys.version.split()[0]} "
                             f"(has {have}); add the version to PYTHONS in tools/flashinfer-carry/assemble.py")
        if "flashinfer" in sys.modules or "tvm_ffi" in sys.modules:
            raise SystemExit("--flashinfer: flashinfer or tvm_ffi is already imported from elsewhere; "
                             "run the bench in a fresh process")
        os.environ["FLASHINFER_DISABLE_JIT"] = "1"  # a missing module is an error, not a 7-minute build
        sys.path.insert(0, os.path.abspath(site))
        import flashinfer
        import flashinfer.topk

        self.version = flashinfer.__version__
        self._top_k = flashinfer.topk.top_k  # loads topk.so on its first call

    def __call__(self, x, k):
        """(values, int64 ids) of the k largest per row, unordered. Rows must be contiguous
        (FlashInfer's CHECK_INPUT); `packed` below makes them so."""
        return self._top_k(x, k)

    @staticmethod
    def packed(view):
        """FlashInfer refuses strided rows (a capacity past n): a packed copy, made once,
        outside the timing."""
        return view if view.is_contiguous() else view.contiguous()


def compare_sets(got_ids, want):
    """'same set' when every row's ids, sorted, are the contract's (ties may differ from our
    lower-index rule: the bench's scores are uniform [0,1) f32, where ties are rare), else
    'differs'."""
    import numpy as np

    got = np.sort(got_ids.astype(np.int64), axis=1)
    return "same set" if np.array_equal(got, want.astype(np.int64)) else "differs"


def self_check(folder):
    """Import from the folder, call once on a tiny input, compare with torch.topk's set."""
    fi = FlashInferTopK(folder)
    import torch

    x = torch.rand(4, 5000, device="cuda")
    values, ids = fi(x, 64)
    torch.cuda.synchronize()
    want = torch.topk(x, 64, dim=1).indices.sort(dim=1).values.cpu().numpy()
    verdict = compare_sets(ids.cpu().numpy(), want)
    print(f"flashinfer {fi.version} from {flashinfer_file()}: top_k(4 x 5000, k=64) -> "
          f"{tuple(ids.shape)} {ids.dtype}, values {values.dtype}; vs torch.topk: {verdict}")
    return 0 if verdict == "same set" else 1


def flashinfer_file():
    return sys.modules["flashinfer"].__file__


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python3 {sys.argv[0]} FOLDER   (the carried .flashinfer)")
    sys.exit(self_check(sys.argv[1]))

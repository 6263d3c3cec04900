"""Check the resource report's occupancy against the CUDA driver's own answer.

For every kernel of build/kernels/<target>/resources.yaml, asks the driver
(cuOccupancyMaxActiveBlocksPerMultiprocessor) how many blocks of the declared size and
dynamic shared memory fit on one SM, and prints it beside xtask's figure. Needs the GPU of
that target, cupy and pyyaml. Exit status 1 when any figure differs.

    python3 tools/occupancy_check.py build/kernels/sm_90
"""
import sys
from pathlib import Path

import cupy as cp
import yaml
from cupy.cuda import driver as drv

MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


def main(folder: Path) -> int:
    report = yaml.safe_load((folder / "resources.yaml").read_text())
    modules = {}
    bad = 0
    print(f"{'kernel':34} {'block':>5} {'dyn':>6}  xtask  driver")
    for k in report["kernels"]:
        src = k["source"]
        if src not in modules:
            modules[src] = cp.RawModule(path=str(folder / f"{src}.cubin"))
        f = modules[src].get_function(k["kernel"])
        dyn = k.get("dynamic_shared", 0)
        if dyn > 48 * 1024:
            drv.funcSetAttribute(f.kernel.ptr, MAX_DYNAMIC_SHARED, dyn)
        got = drv.occupancyMaxActiveBlocksPerMultiprocessor(f.kernel.ptr, k["block"], dyn)
        ours = (k.get("occupancy") or {}).get("blocks")
        mark = "" if ours == got else "   <-- differs"
        bad += ours != got
        print(f"{k['kernel']:34} {k['block']:5} {dyn:6}  {ours!s:>5}  {got:6}{mark}")
    print(f"{bad} of {len(report['kernels'])} kernels differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "build/kernels/sm_90")))

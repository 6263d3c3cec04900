"""Launch qsa's kernels exactly as the Rust runner launches them.

Every launch a bench makes comes from `qsa plan --json` (src/plan/request.rs), which prints
the plan the runner itself executes (src/gpu/launch.rs: kernel symbol, grid, block, dynamic
shared bytes, arguments, buffers with their sizes and roles). Nothing here derives a grid, a
block, shared bytes, a split or a kernel choice: a bench asks for a shape (and a matrix
variant or switches), binds its tensors to the plan's buffers by name, and `Call` launches
the plan's steps. `--plan-only` in each bench records, through `DryLauncher`, the launches
it would make, without cupy, torch or a GPU; `cargo test -p qsa --test bench_plans`
compares them with the Rust plan, so a launch rule re-introduced in Python fails a test.

Imports only the standard library and numpy, so the dry mode runs where cupy does not.
"""
import json
import subprocess

import numpy as np


class PlanError(Exception):
    """`qsa plan` refused the request (its message names the problem and the fix)."""


class Planner:
    """Asks the `qsa` binary for plans (one process per distinct request, cached)."""

    def __init__(self, qsa, target, matrix="matrix.yaml"):
        self.qsa = qsa
        self.target = target
        self.matrix = matrix
        self._cache = {}

    def argv(self, family, shape, variant="auto", switches=None, backward=False):
        """The `qsa plan` arguments of a request (also what --plan-only prints)."""
        spec = ",".join(f"{k}={v}" for k, v in shape.items())
        argv = ["plan", "--json", "--matrix", self.matrix, "--target", self.target,
                f"--{family}", spec, "--variant", variant]
        for k, v in sorted((switches or {}).items()):
            argv += ["--switch", f"{k}={v}"]
        if backward:
            argv.append("--backward")
        return argv

    def plan(self, family, shape, variant="auto", switches=None, backward=False):
        argv = self.argv(family, shape, variant, switches, backward)
        key = tuple(argv)
        if key not in self._cache:
            try:
                r = subprocess.run([self.qsa] + argv, capture_output=True, text=True)
            except OSError as e:
                raise PlanError(f"cannot run {self.qsa}: {e} (build it with `cargo build --release "
                                f"-p qsa`, or pass --qsa PATH)") from e
            if r.returncode != 0:
                raise PlanError(f"{self.qsa} {' '.join(argv)}: {r.stderr.strip()}")
            p = json.loads(r.stdout)
            p["argv"] = argv
            self._cache[key] = p
        return self._cache[key]


def nbytes(buf):
    """Bytes of a torch tensor, a cupy array or a DryBuffer."""
    if hasattr(buf, "element_size"):  # torch
        return buf.numel() * buf.element_size()
    return int(buf.nbytes)


class Call:
    """One planned call bound to buffers. `setup()` once (zeroed workspaces, the backward's
    forward), then `__call__()` per timed call. Buffers the bench does not bind (workspaces,
    outputs it ignores) are made with `alloc(name, nbytes)`; every input must be bound."""

    def __init__(self, plan, launcher, bind=None, alloc=None):
        self.plan = plan
        self.launcher = launcher
        self.buffers = {}
        bind = dict(bind or {})
        for b in plan["buffers"]:
            name, want = b["name"], b["bytes"]
            buf = bind.pop(name, None)
            if buf is None:
                if b["role"] == "input":
                    raise PlanError(f"input `{name}` of {plan['argv']} not bound")
                buf = alloc(name, want)
            if nbytes(buf) != want:
                raise PlanError(f"buffer `{name}` has {nbytes(buf)} bytes, the plan sizes it {want} "
                                f"({' '.join(plan['argv'])})")
            self.buffers[name] = buf
        if bind:
            raise PlanError(f"bound {sorted(bind)}, which the plan does not have: {[b['name'] for b in plan['buffers']]}")

    def _arg(self, a):
        if a == "null":
            return np.uint64(0)
        (kind, v), = a.items()
        if kind == "buffer":
            return self.launcher.pointer(self.buffers[v])
        return {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "f32": np.float32}[kind](v)

    def _run(self, steps):
        for step in steps:
            if step["op"] == "zero":
                self.launcher.zero(step["buffer"], self.buffers[step["buffer"]])
                continue
            self.launcher.launch(
                self.plan["module"], step["kernel"], tuple(step["grid"]), tuple(step["block"]),
                tuple(self._arg(a) for a in step["args"]), step["shared_bytes"])

    def setup(self):
        self._run(self.plan["setup"])

    def __call__(self):
        self._run(self.plan["call"])


class CupyLauncher:
    """Launches on torch's current stream (so torch events time it and CUDA graphs capture
    it), loading `<kernels>/<module>.cubin` once per module."""

    def __init__(self, kernels_dir):
        import cupy
        import torch

        self.cp, self.torch = cupy, torch
        self.kernels_dir = kernels_dir
        self.modules, self.fns = {}, {}

    def function(self, module, kernel):
        f = self.fns.get((module, kernel))
        if f is None:
            if module not in self.modules:
                self.modules[module] = self.cp.RawModule(path=f"{self.kernels_dir}/{module}.cubin")
            f = self.modules[module].get_function(kernel)
            self.fns[(module, kernel)] = f
        return f

    def pointer(self, buf):
        return np.uint64(buf.data_ptr())

    def zero(self, name, buf):
        buf.zero_()

    def launch(self, module, kernel, grid, block, args, shared):
        f = self.function(module, kernel)
        # Driver plumbing, not a launch rule: past 48 KiB of static + dynamic shared memory a
        # kernel must opt in (the function's attribute starts at 48 KiB minus its static part).
        if shared > 0 and f.max_dynamic_shared_size_bytes < shared:
            f.max_dynamic_shared_size_bytes = shared
        with self.cp.cuda.ExternalStream(self.torch.cuda.current_stream().cuda_stream):
            f(grid, block, args, shared_mem=shared)


class DryBuffer:
    def __init__(self, name, nbytes):
        self.name, self.nbytes = name, nbytes


class DryLauncher:
    """Records what `Call` would launch, in the plan's JSON form, for --plan-only."""

    def __init__(self):
        self.steps = []

    def pointer(self, buf):
        return buf

    def zero(self, name, buf):
        self.steps.append({"op": "zero", "buffer": name})

    @staticmethod
    def _arg(a):
        if isinstance(a, DryBuffer):
            return {"buffer": a.name}
        if isinstance(a, np.uint64) and a == 0:
            return "null"
        for t, kind in ((np.int32, "i32"), (np.uint32, "u32"), (np.int64, "i64")):
            if type(a) is t:
                return {kind: int(a)}
        if type(a) is np.float32:
            return {"f32": float(a)}
        return {"unknown": repr(a)}

    def launch(self, module, kernel, grid, block, args, shared):
        self.steps.append({"op": "launch", "kernel": kernel, "grid": list(grid), "block": list(block),
                           "shared_bytes": shared, "args": [self._arg(a) for a in args]})


def dry_run(plan):
    """What a `Call` of `plan` launches: {"argv", "setup", "call"} in the plan's JSON form."""
    inputs = {b["name"]: DryBuffer(b["name"], b["bytes"]) for b in plan["buffers"] if b["role"] == "input"}
    launcher = DryLauncher()
    call = Call(plan, launcher, bind=inputs, alloc=DryBuffer)
    call.setup()
    setup, launcher.steps = launcher.steps, []
    call()
    return {"argv": plan["argv"], "setup": setup, "call": launcher.steps}


def plan_only(planned, out):
    """Print (one JSON document) every call a bench would make: its `qsa plan` request and
    the launches `Call` would make from it. `planned` yields (label, plan)."""
    calls = []
    for label, plan in planned:
        rec = dry_run(plan)
        rec["label"] = label
        calls.append(rec)
    json.dump({"calls": calls}, out, indent=1)
    out.write("\n")
    return 0


def add_plan_args(ap, target="sm_90"):
    """The options every bench shares for planning."""
    ap.add_argument("--qsa", default=".h200/qsa",
                    help="the qsa binary that prints launch plans (`cargo build --release -p qsa`; "
                         "default %(default)s)")
    ap.add_argument("--matrix", default="matrix.yaml", help="matrix.yaml of the same checkout (default %(default)s)")
    ap.add_argument("--target", default=target, help="matrix target the kernels were built for (default %(default)s)")
    ap.add_argument("--plan-only", action="store_true",
                    help="print, as JSON, every launch this bench would make (no GPU, no cupy or torch) and exit")


def torch_alloc(name, n):
    """Device bytes for a buffer the bench does not bind."""
    import torch

    return torch.empty(n, dtype=torch.uint8, device="cuda")


def check_device(plan, log=print):
    """Say so when the GPU is not the card the matrix target describes (the plan's splits and
    shared-memory choices follow matrix.yaml, as the runner's do)."""
    import torch

    t = plan["target"]
    props = torch.cuda.get_device_properties(0)
    if props.multi_processor_count != t["multiprocessors"]:
        log(f"# note: this GPU has {props.multi_processor_count} multiprocessors, matrix.yaml's {t['name']} "
            f"says {t['multiprocessors']}: plans follow matrix.yaml, as the runner's do")
    optin = getattr(props, "shared_memory_per_block_optin", None)
    if optin is not None and optin < t["shared_per_block"]:
        log(f"# WARNING: this GPU opts a block into {optin} B of shared memory, matrix.yaml's {t['name']} "
            f"plans with {t['shared_per_block']}: launches that need more will fail")

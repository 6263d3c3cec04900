//! GPU host code for the top-k family (kernels/topk.cu): validation, dispatch, buffers and
//! launches, written once against `GpuApi` for CUDA and HIP.
//!
//! Kernel ABI (extern "C", all arguments by value):
//!
//! - `qsa_topk_register(const float* scores, int capacity, int nq, int n, int k,
//!   const int* active /* or null */, int* out, int few)`: grid (nq), block
//!   `register_threads(n)` (a multiple of 64 in 256..=1024 with block * 8 >= n), no dynamic
//!   shared memory; `few` = 1 (`register_few`, the default) tries the small-k bound
//!   (k <= 32) first.
//! - `qsa_topk_wide(<the register kernel's first seven arguments>, int staged)`: grid (nq), block
//!   `WIDE_THREADS`; `staged` = 1 with `n * 4` bytes of dynamic shared memory when that
//!   fits the device (`wide_staged_bytes`), else 0 and none (every pass reads global memory).
//!   For k <= waves per block (prefill's small k) one pass and a direct ranking of the few
//!   entries above a bound usually replace the radix passes; same launch either way.
//! - `qsa_topk_split_bound(const float* scores, int capacity, int nq, int n, int k,
//!   unsigned* ws)`: grid (chunks, nq), block `SPLIT_THREADS`.
//! - `qsa_topk_split_select(const float* scores, int capacity, int nq, int n, int k,
//!   unsigned* ws, int* out)`: grid (chunks, nq), block `SPLIT_THREADS`, after the bound
//!   kernel on the same stream. `ws` is `split_workspace_bytes` bytes, zeroed once before
//!   its first use; the kernels leave it reusable. One workspace per stream.
//!
//! - `qsa_topk_cluster(<the register kernel's first seven arguments>)`: grid (CLUSTER_CTAS, nq), clusters
//!   of CLUSTER_CTAS along x (compiled in: `__cluster_dims__`), block `CLUSTER_THREADS`,
//!   `cluster_part(n) * 4` bytes of dynamic shared memory (the part's keys). sm_90 only
//!   (dispatch: `Feature::Clusters`), n <= CLUSTER_MAX_N.
//!
//! - `qsa_topk_spec[_2k|_8k|_16k|_lean|_8k_lean](<the split select kernel's arguments>, int
//!   flags)`: grid (ceil(n / chunk), nq), block `SPLIT_THREADS`, alone (one launch), chunks
//!   of 4,096 / 2,048 / 8,192 / 16,384 entries (`SpecChunk`, `SpecOptions::kernel`; all but
//!   `qsa_topk_spec` on NVIDIA only); the split's workspace for that chunk
//!   (`spec_workspace_bytes`), zeroed once. `flags`: the variants of `SpecOptions`.
//!
//! chunks = ceil(n / SPLIT_CHUNK) unless said. Output: `nq * k` ids, row q at `out + q * k`.

use super::launch::{launch, LaunchPlan, PlanArg, PlannedCall, Role, Step};
use super::{Family, GpuApi, GpuProps, LaunchDims};
use crate::backend::{BackendError, BackendResult, Prepared};
use crate::dispatch::topk::{
    choose, spec_options, SpecOptions, TopkKernel, TopkShape, CLUSTER_CTAS, CLUSTER_MAX_N,
    REGISTER_MAX_N, SPLIT_CHUNK,
};
use crate::dispatch::{Switches, TargetCaps};
use crate::problem::{Output, TopkProblem};

/// Keys each thread of the register kernel holds (TOPK_REG_ITEMS in kernels/topk.cu).
pub const REGISTER_ITEMS: usize = 8;
/// Threads of a wide-kernel CTA.
pub const WIDE_THREADS: u32 = 1024;
/// Threads of a split CTA (TOPK_SPLIT_THREADS in kernels/topk.cu).
pub const SPLIT_THREADS: u32 = 512;

/// Threads of a cluster-kernel CTA (TOPK_CLUSTER_THREADS in kernels/common/topk_cluster.h).
pub const CLUSTER_THREADS: u32 = 1024;

/// Entries of one CTA's part of a row in the cluster kernel.
pub fn cluster_part(n: usize) -> usize {
    n.div_ceil(CLUSTER_CTAS)
}

/// Block size of the register kernel for rows of `n` entries: enough threads for 8 keys
/// each, at least 256 (one per histogram bin), a multiple of 64 (whole waves on every target).
pub fn register_threads(n: usize) -> u32 {
    let need = n.div_ceil(REGISTER_ITEMS).div_ceil(64) * 64;
    need.clamp(256, 1024) as u32
}

/// The register kernel's small-k path (QSA_TOPK_REGISTER_FEW: 1 on, the default; 0 off).
/// Measured on the H200 (2026-12-02 06:07 UTC, side by side, 256 queries, k = 16): 2,048
/// entries 8.3 -> 4.6 us (torch.topk 30.1: 3.6x -> 6.6x), 4,096 10.3 -> 5.4 us.
pub fn register_few(sw: &Switches) -> BackendResult<bool> {
    match sw.get("QSA_TOPK_REGISTER_FEW") {
        Some("0") => Ok(false),
        None | Some("1") => Ok(true),
        Some(other) => Err(BackendError::Input(format!(
            "QSA_TOPK_REGISTER_FEW={other}: expected 0 or 1"
        ))),
    }
}

/// Static shared memory of the top-k kernels, rounded up (TopkShared is ~3.3 KiB).
const STATIC_SHARED_BYTES: usize = 4096;

/// Dynamic shared memory for the wide kernel to hold a row's keys, if the device has it.
pub fn wide_staged_bytes(n: usize, max_shared_per_block: u32) -> Option<u32> {
    let bytes = n * 4;
    (bytes + STATIC_SHARED_BYTES <= max_shared_per_block as usize).then_some(bytes as u32)
}

/// Chunks of the split for rows of `n` entries.
pub fn split_chunks(n: usize) -> usize {
    n.div_ceil(SPLIT_CHUNK).max(1)
}

/// Bytes of the split's workspace (layout in kernels/common/topk_split.h, TopkSplitWs).
pub fn split_workspace_bytes(nq: usize, n: usize, k: usize) -> usize {
    chunked_workspace_bytes(nq, n, k, SPLIT_CHUNK)
}

/// Bytes of the speculative kernel's workspace: the split's layout for its chunk.
pub fn spec_workspace_bytes(nq: usize, n: usize, k: usize, chunk: usize) -> usize {
    chunked_workspace_bytes(nq, n, k, chunk)
}

fn chunked_workspace_bytes(nq: usize, n: usize, k: usize, chunk: usize) -> usize {
    let m = n.div_ceil(chunk).max(1);
    let kc = k.min(chunk);
    4 * (nq + 2 * nq * m + 2 * nq * m * kc)
}

// The register kernel's largest block holds REGISTER_MAX_N keys, and the split's final
// step scans one chunk count per thread.
const _: () = assert!(REGISTER_MAX_N <= 1024 * REGISTER_ITEMS);
const _: () = assert!(crate::dispatch::topk::MAX_N / SPLIT_CHUNK <= SPLIT_THREADS as usize);

/// The shape of one top-k call: all a plan needs (no data).
#[derive(Clone, Copy, Debug)]
pub struct TopkCall {
    pub nq: usize,
    pub n: usize,
    pub capacity: usize,
    pub k: usize,
    /// Per-query active counts are passed (prefill form).
    pub has_active: bool,
}

/// Validate `p`, choose the kernel with `crate::dispatch`, and return every buffer and
/// launch of one call. The runner launches this plan (`prepare`), `qsa plan` prints it.
pub fn launch_plan(
    caps: &TargetCaps,
    props: &GpuProps,
    switches: &Switches,
    p: &TopkCall,
) -> BackendResult<LaunchPlan> {
    if p.nq == 0 {
        return Err(BackendError::Input("top-k with nq = 0 queries".into()));
    }
    if p.k == 0 {
        return Err(BackendError::Input(
            "top-k with k = 0: k must be at least 1".into(),
        ));
    }
    if p.n > p.capacity {
        return Err(BackendError::Input(format!(
            "top-k with n = {} > capacity = {}",
            p.n, p.capacity
        )));
    }
    if p.capacity > i32::MAX as usize || p.nq > i32::MAX as usize {
        return Err(BackendError::Shape(format!(
            "top-k capacity {} / nq {} exceed the kernels' 32-bit arguments",
            p.capacity, p.nq
        )));
    }
    let scores_len =
        p.nq.checked_mul(p.capacity)
            .ok_or_else(|| BackendError::Shape("nq * capacity overflows".into()))?;
    let shape = TopkShape {
        nq: p.nq,
        n: p.n,
        k: p.k,
        has_active: p.has_active,
    };
    let kernel = choose(caps, switches, shape)?;
    if kernel == TopkKernel::Register && p.n > REGISTER_MAX_N {
        return Err(BackendError::Shape(format!(
            "register top-k over n = {} > {REGISTER_MAX_N}",
            p.n
        )));
    }
    if matches!(kernel, TopkKernel::Split | TopkKernel::Spec) && p.nq > 65535 {
        return Err(BackendError::Shape(format!(
            "{} top-k with nq = {} > 65535 (grid y)",
            kernel.name(),
            p.nq
        )));
    }
    let mut plan = LaunchPlan::new(Family::Topk, kernel.name());
    let scores = plan.buffer("scores", scores_len * 4, Role::Input);
    let active = if p.has_active {
        plan.buffer("active", p.nq * 4, Role::Input)
    } else {
        PlanArg::Null
    };
    let out = plan.buffer("out", p.nq * p.k * 4, Role::Output);
    let (cap, nq, n, k) = (
        PlanArg::I32(p.capacity as i32),
        PlanArg::I32(p.nq as i32),
        PlanArg::I32(p.n as i32),
        PlanArg::I32(p.k as i32),
    );
    let one = |grid: (u32, u32, u32), threads: u32| LaunchDims {
        grid,
        block: (threads, 1, 1),
        shared_bytes: 0,
    };
    match kernel {
        TopkKernel::Register => {
            let few = PlanArg::I32(register_few(switches)? as i32);
            plan.call.push(launch(
                "qsa_topk_register",
                one((p.nq as u32, 1, 1), register_threads(p.n)),
                vec![scores, cap, nq, n, k, active, out, few],
            ))
        }
        TopkKernel::Wide => {
            let staged = wide_staged_bytes(p.n, props.max_shared_per_block);
            let mut dims = one((p.nq as u32, 1, 1), WIDE_THREADS);
            dims.shared_bytes = staged.unwrap_or(0);
            let flag = PlanArg::I32(staged.is_some() as i32);
            plan.call.push(launch(
                "qsa_topk_wide",
                dims,
                vec![scores, cap, nq, n, k, active, out, flag],
            ));
        }
        TopkKernel::Cluster => {
            if p.n > CLUSTER_MAX_N || p.nq > 65535 {
                return Err(BackendError::Shape(format!(
                    "cluster top-k with n = {} > {CLUSTER_MAX_N} or nq = {} > 65535 (grid y)",
                    p.n, p.nq
                )));
            }
            let mut dims = one((CLUSTER_CTAS as u32, p.nq as u32, 1), CLUSTER_THREADS);
            dims.shared_bytes = (cluster_part(p.n) * 4) as u32;
            plan.call.push(launch(
                "qsa_topk_cluster",
                dims,
                vec![scores, cap, nq, n, k, active, out],
            ));
        }
        TopkKernel::Split => {
            // Zeroed once; the kernels leave it reusable.
            let ws = plan.buffer("ws", split_workspace_bytes(p.nq, p.n, p.k), Role::Workspace);
            plan.setup.push(Step::Zero { buffer: "ws" });
            let grid = (split_chunks(p.n) as u32, p.nq as u32, 1);
            plan.call.push(launch(
                "qsa_topk_split_bound",
                one(grid, SPLIT_THREADS),
                vec![scores, cap, nq, n, k, ws],
            ));
            plan.call.push(launch(
                "qsa_topk_split_select",
                one(grid, SPLIT_THREADS),
                vec![scores, cap, nq, n, k, ws, out],
            ));
        }
        TopkKernel::Spec => {
            let o: SpecOptions = spec_options(caps, switches, shape)?;
            let chunk = o.chunk.entries();
            // The split's layout for this chunk, zeroed once; the kernel leaves it reusable.
            let ws = plan.buffer(
                "ws",
                spec_workspace_bytes(p.nq, p.n, p.k, chunk),
                Role::Workspace,
            );
            plan.setup.push(Step::Zero { buffer: "ws" });
            plan.call.push(launch(
                o.kernel(),
                one((p.n.div_ceil(chunk) as u32, p.nq as u32, 1), o.threads()),
                vec![scores, cap, nq, n, k, ws, out, PlanArg::I32(o.flags())],
            ));
        }
    }
    Ok(plan)
}

/// Check `p`'s data against its shape, plan the call, upload the inputs, and return the
/// prepared call. The signature is the contract with `gpu::backend`.
pub fn prepare<'a, A: GpuApi>(
    api: &'a A,
    caps: &TargetCaps,
    switches: &Switches,
    p: &'a TopkProblem,
) -> BackendResult<Box<dyn Prepared + 'a>> {
    Ok(Box::new(planned_call(api, caps, switches, p)?))
}

/// The key the speculative kernel leaves in a query's first chunk-bound slot of the workspace
/// when its check failed and it selected over the whole row (TOPK_SPEC_FELL_BACK in
/// kernels/common/topk_split.h; above every order key). The next call's chunks overwrite it.
pub const SPEC_FELL_BACK: u32 = 0xffff_ffff;

/// Run `p` once through the speculative kernel's plan (forced by the caller's switches) and
/// say, per query, whether its last CTA fell back to selecting over the whole row: the ids
/// are exact either way, so this is the only way to see a bound that drops winners (a
/// regression that makes the kernel slow, never wrong). Errors if the plan is not the
/// speculative kernel's. The kernels leave the mark in emulated builds (and probes built
/// with -DTOPK_SPEC_MARK) only: on a card's build every query reads `false`.
pub fn spec_fell_back<A: GpuApi>(
    api: &A,
    caps: &TargetCaps,
    switches: &Switches,
    p: &TopkProblem,
) -> BackendResult<Vec<bool>> {
    let mut call = planned_call(api, caps, switches, p)?;
    if call.plan().dispatched != TopkKernel::Spec.name() {
        return Err(BackendError::Input(format!(
            "spec_fell_back: the plan runs the {} kernel, not spec (force it: QSA_TOPK_KERNEL=spec)",
            call.plan().dispatched
        )));
    }
    let shape = TopkShape {
        nq: p.nq,
        n: p.n,
        k: p.k,
        has_active: p.active.is_some(),
    };
    let m =
        p.n.div_ceil(spec_options(caps, switches, shape)?.chunk.entries());
    call.run()?;
    // done[nq] | bound[nq * m] | ...
    let ws = call.download::<u32>("ws")?;
    Ok((0..p.nq)
        .map(|q| ws[p.nq + q * m] == SPEC_FELL_BACK)
        .collect())
}

fn planned_call<'a, A: GpuApi>(
    api: &'a A,
    caps: &TargetCaps,
    switches: &Switches,
    p: &'a TopkProblem,
) -> BackendResult<PlannedCall<'a, A>> {
    let call = TopkCall {
        nq: p.nq,
        n: p.n,
        capacity: p.capacity,
        k: p.k,
        has_active: p.active.is_some(),
    };
    let plan = launch_plan(caps, api.props(), switches, &call)?;
    let want = p.nq * p.capacity;
    if p.scores.len() != want {
        return Err(BackendError::Input(format!(
            "top-k scores hold {} values; nq * capacity = {} * {} = {want}",
            p.scores.len(),
            p.nq,
            p.capacity
        )));
    }
    let mut inputs = vec![("scores", super::as_bytes(&p.scores))];
    if let Some(a) = &p.active {
        if a.len() != p.nq {
            return Err(BackendError::Input(format!(
                "top-k active counts: {} for {} queries",
                a.len(),
                p.nq
            )));
        }
        inputs.push(("active", super::as_bytes(a)));
    }
    let output = |c: &PlannedCall<'a, A>| Ok(Output::Ids(c.download::<i32>("out")?));
    PlannedCall::new(api, plan, &inputs, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel source's constants must agree with the host's launch rules.
    #[test]
    fn kernel_constants_match_the_host() {
        // The sizes live in topk.cu, the cluster kernel's in the header of its pieces.
        let src = [
            include_str!("../../kernels/topk.cu"),
            include_str!("../../kernels/common/topk_cluster.h"),
        ]
        .concat();
        let define = |name: &str| -> usize {
            let line = src
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| {
                    panic!("{name} not defined in kernels/topk.cu or common/topk_cluster.h")
                });
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        };
        assert_eq!(define("TOPK_REG_ITEMS"), REGISTER_ITEMS);
        assert_eq!(define("TOPK_SPLIT_CHUNK"), SPLIT_CHUNK);
        assert_eq!(define("TOPK_SPLIT_THREADS"), SPLIT_THREADS as usize);
        assert_eq!(define("TOPK_CLUSTER"), CLUSTER_CTAS);
        assert_eq!(define("TOPK_CLUSTER_THREADS"), CLUSTER_THREADS as usize);
        assert_eq!(
            define("TOPK_MAX_CHUNKS"),
            crate::dispatch::topk::MAX_N / SPLIT_CHUNK
        );
        assert!(WIDE_THREADS as usize <= define("TOPK_MAX_THREADS"));
        let split = include_str!("../../kernels/common/topk_split.h");
        assert!(
            split.contains(&format!(
                "#define TOPK_SPEC_FELL_BACK {SPEC_FELL_BACK:#x}u\n"
            )),
            "TOPK_SPEC_FELL_BACK in kernels/common/topk_split.h must be SPEC_FELL_BACK"
        );
        // The wide kernel's small-k path ranks one candidate per thread.
        assert!(define("TOPK_FEW_CAP") <= WIDE_THREADS as usize);
    }

    #[test]
    fn register_threads_cover_the_row() {
        for n in [1, 255, 2048, 2049, 4096, 8191, 8192] {
            let t = register_threads(n) as usize;
            assert!(
                t * REGISTER_ITEMS >= n && t.is_multiple_of(64) && (256..=1024).contains(&t),
                "n={n} t={t}"
            );
        }
    }

    #[test]
    fn wide_stages_rows_that_fit() {
        assert_eq!(wide_staged_bytes(32_768, 232_448), Some(131_072));
        assert_eq!(wide_staged_bytes(262_144, 232_448), None);
        assert_eq!(wide_staged_bytes(16_384, 65_536), None); // 64 KiB LDS minus the static part
    }

    #[test]
    fn split_workspace_layout() {
        // done[1] | bound[64] | cnt[64] | keys[64*2048] | ids[64*2048]
        assert_eq!(
            split_workspace_bytes(1, 262_144, 2048),
            4 * (1 + 128 + 2 * 64 * 2048)
        );
        assert_eq!(split_chunks(4097), 2);
    }
}

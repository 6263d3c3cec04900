//! Top-k dispatch: register kernel for small n, two-stage split for decode (the one-launch
//! speculative kernel on sm_90, measured faster there, with its options: `spec_options`),
//! wide otherwise.
//! The one-launch cluster kernel (sm_90) runs only when forced (`QSA_TOPK_KERNEL=cluster`):
//! on the H200 it is slower than the split (docs/results/topk-cluster-2026-12-01/).

use super::{Feature, Switches, TargetCaps, Vendor};
use crate::backend::BackendError;

/// The top-k kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopkKernel {
    /// One CTA per query, candidates held in registers: n <= REGISTER_MAX_N.
    Register,
    /// One CTA per query, any n up to the capacity limit.
    Wide,
    /// Two stages for decode: chunks of at most SPLIT_CHUNK entries, one CTA each; then one
    /// CTA per query over the chunks' candidates.
    Split,
    /// Decode in one launch on targets with thread-block clusters: CLUSTER_CTAS CTAs per
    /// query share one radix select through distributed shared memory. n <= CLUSTER_MAX_N.
    /// Forced only (measured slower than the split on the H200).
    Cluster,
    /// Decode in one launch: the split's chunks, each keeping its entries above its own
    /// bound; the last CTA of a query checks that the bounds could not have dropped a winner
    /// (else it selects over the whole row). The engine's decode kernel on sm_90
    /// (tools/h200-topk-split/README.md); forced elsewhere.
    Spec,
}

impl TopkKernel {
    pub fn name(self) -> &'static str {
        match self {
            TopkKernel::Register => "register",
            TopkKernel::Wide => "wide",
            TopkKernel::Split => "split",
            TopkKernel::Cluster => "cluster",
            TopkKernel::Spec => "spec",
        }
    }
}

/// Largest n the register kernel holds (entries per query).
pub const REGISTER_MAX_N: usize = 8192;
/// Largest chunk of the split's stage A.
pub const SPLIT_CHUNK: usize = 4096;
/// Most queries for which the split pays (past that, one CTA per query fills the GPU).
pub const SPLIT_MAX_QUERIES: usize = 16;
/// CTAs of one query's cluster (TOPK_CLUSTER in kernels/common/topk_cluster.h; 8 is the portable size).
pub const CLUSTER_CTAS: usize = 8;
/// Largest n the cluster kernel takes: a part of n / 8 keys staged in 160 KiB of shared
/// memory, beside the kernel's 27.2 KiB of static shared memory (sm_90 resources snapshot).
pub const CLUSTER_MAX_N: usize = CLUSTER_CTAS * 40 * 1024;
/// Largest n (and capacity) any kernel takes: the engine's largest score buffer.
pub const MAX_N: usize = 1 << 20;
/// Largest k any kernel takes.
pub const MAX_K: usize = 4096;

/// The top-k shape dispatch looks at.
#[derive(Clone, Copy, Debug)]
pub struct TopkShape {
    pub nq: usize,
    pub n: usize,
    pub k: usize,
    /// Prefill form (per-query active counts) or decode form.
    pub has_active: bool,
}

/// The cluster kernel exists for the target and takes the shape.
fn cluster_fits(caps: &TargetCaps, s: TopkShape) -> bool {
    caps.has(super::Feature::Clusters) && s.n <= CLUSTER_MAX_N
}

/// Choose the top-k kernel. Errors name the limit that the shape exceeds.
pub fn choose(caps: &TargetCaps, sw: &Switches, s: TopkShape) -> Result<TopkKernel, BackendError> {
    if s.n > MAX_N {
        return Err(BackendError::Shape(format!(
            "top-k over n = {} entries exceeds the kernels' limit of {MAX_N}: split the row or raise MAX_N in src/dispatch/topk.rs",
            s.n
        )));
    }
    if s.k > MAX_K {
        return Err(BackendError::Shape(format!(
            "top-k with k = {} exceeds the kernels' limit of {MAX_K}",
            s.k
        )));
    }
    let forced = match sw.get("QSA_TOPK_KERNEL") {
        Some("register") => Some(TopkKernel::Register),
        Some("wide") => Some(TopkKernel::Wide),
        Some("split") => Some(TopkKernel::Split),
        Some("cluster") => Some(TopkKernel::Cluster),
        Some("spec") => Some(TopkKernel::Spec),
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_KERNEL={other}: expected register, wide, split, cluster or spec"
            )))
        }
        None => None,
    };
    if let Some(kernel) = forced {
        // A forced kernel outside its limits falls through to one that handles the shape.
        return Ok(match kernel {
            TopkKernel::Register if s.n > REGISTER_MAX_N => TopkKernel::Wide,
            TopkKernel::Split | TopkKernel::Spec if s.has_active => TopkKernel::Wide,
            TopkKernel::Cluster if !cluster_fits(caps, s) => TopkKernel::Wide,
            k => k,
        });
    }
    if s.n <= REGISTER_MAX_N {
        return Ok(TopkKernel::Register);
    }
    let decode = !s.has_active && s.nq <= SPLIT_MAX_QUERIES;
    let split_enabled = match caps.vendor {
        Vendor::Nvidia | Vendor::Cpu => true,
        // HIP: the split ships only for gfx906 and only when the engine's switch is on.
        Vendor::Amd => caps.is_gfx906() && sw.on("STRATA_GFX906_TOPK_SPLIT"),
    };
    // The speculative kernel where it was measured faster than the split: the H200
    // (sm_90, the NVIDIA target with clusters; 18.4 / 20.4 / 42.8 us against the split's
    // 20.6 / 23.7 / 47.0 us for 1 / 3 / 16 x 262,144, k = 2048, tools/h200-topk-split/).
    let measured_faster = caps.vendor == Vendor::Nvidia && caps.has(super::Feature::Clusters);
    Ok(match (decode && split_enabled, measured_faster) {
        (true, true) => TopkKernel::Spec,
        (true, false) => TopkKernel::Split,
        (false, _) => TopkKernel::Wide,
    })
}

/// Chunk sizes of the speculative kernel: one entry point each (kernels/topk.cu), 512
/// threads holding 8 / 16 / 32 entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecChunk {
    K2,
    K4,
    K8,
    K16,
}

impl SpecChunk {
    pub fn entries(self) -> usize {
        match self {
            SpecChunk::K2 => 2048,
            SpecChunk::K4 => 4096,
            SpecChunk::K8 => 8192,
            SpecChunk::K16 => 16_384,
        }
    }
    pub fn kernel(self) -> &'static str {
        match self {
            SpecChunk::K2 => "qsa_topk_spec_2k",
            SpecChunk::K4 => "qsa_topk_spec",
            SpecChunk::K8 => "qsa_topk_spec_8k",
            SpecChunk::K16 => "qsa_topk_spec_16k",
        }
    }
    /// The engine's chunk: 4,096 while its CTAs (nq x chunks) take at most one per SM, else
    /// 8,192. Measured on the H200, side by side, k = 2048 of 262,144, the lean chunk step
    /// (the engine's, below; 2026-12-02 08:28 UTC, lead's call P): 1 query (64 CTAs) 14.0 us
    /// at 4,096 / 15.0 at 8,192; 3 queries 17.0 at 4,096 (192 CTAs: two on 60 SMs) / 15.4 at
    /// 8,192 (96); 16 queries 26.7 at 8,192. The general step (06:07 UTC, call A1): 1 query
    /// 15.1 / 17.7, 3 queries 18.1 / 17.9, 16 queries 36.3 / 33.7, and 40.4 at 16,384 (32
    /// keys per thread cost more than the waves saved). 2,048 and 16,384 run only when forced.
    fn engine(caps: &TargetCaps, s: TopkShape) -> SpecChunk {
        let slots = caps.multiprocessors.max(1) as usize;
        if s.nq * s.n.div_ceil(SpecChunk::K4.entries()) <= slots {
            SpecChunk::K4
        } else {
            SpecChunk::K8
        }
    }
}

/// The speculative kernel's variants (each exact; they differ in time): the chunk, and the
/// `flags` bits of the speculative kernel (TOPK_SPEC_* in kernels/common/topk_spec.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpecOptions {
    pub chunk: SpecChunk,
    /// Final step: radix windows from the candidates' first differing bit.
    pub final_window: bool,
    /// Chunk bound: one histogram pass over the octave of the chunk's largest key.
    pub bound_window: bool,
    /// Chunk keys by 16-byte loads.
    pub vec4: bool,
    /// The lean chunk step (`qsa_topk_spec[_8k]_lean`: one compare per key to keep the
    /// entries >= bound), chunks of 2,048, 4,096 and 8,192; the engine's default there since
    /// session 8 (measured faster at 1 / 3 / 16 queries: `SpecChunk::engine`).
    pub lean: bool,
    /// Session 8's forms (not measured yet), in the `_x` entry points (chunks of 4,096 and
    /// 8,192, not lean) and `qsa_topk_spec_t1024`: thread 0 alone fences around the query's
    /// ticket (`QSA_TOPK_SPEC_FENCE=one`).
    pub fence_one: bool,
    /// The chunk bound from the threads' maxima (`QSA_TOPK_SPEC_BOUND=tmax`; the one-pass
    /// bound where the margin asks for more entries than the CTA has threads).
    pub bound_tmax: bool,
    /// The final step's window histograms by plain atomic adds
    /// (`QSA_TOPK_SPEC_FINAL=window_lean`).
    pub final_lean: bool,
    /// 1,024-thread CTAs over chunks of 8,192 (`QSA_TOPK_SPEC_THREADS=1024`:
    /// `qsa_topk_spec_t1024`, session 8's forms compiled in).
    pub wide_cta: bool,
    /// The float-domain lean chunk step (`QSA_TOPK_SPEC_KEEP=float`: `qsa_topk_spec[_8k]_float`;
    /// the threads' maxima bound and float compares, keys only for the kept entries).
    pub float_keep: bool,
}

impl SpecOptions {
    /// The entry point: the chunk's, its lean form, or the one with session 8's forms
    /// compiled in (`spec_options` admits only the pairs named here).
    pub fn kernel(self) -> &'static str {
        let x = self.fence_one || self.bound_tmax || self.final_lean;
        match (self.chunk, self.lean, x) {
            (SpecChunk::K4, _, _) if self.float_keep => "qsa_topk_spec_float",
            (SpecChunk::K8, _, _) if self.float_keep => "qsa_topk_spec_8k_float",
            (_, true, _) if self.wide_cta => "qsa_topk_spec_t1024_lean_x",
            (_, false, _) if self.wide_cta => "qsa_topk_spec_t1024",
            (SpecChunk::K4, true, true) => "qsa_topk_spec_lean_x",
            (SpecChunk::K8, true, true) => "qsa_topk_spec_8k_lean_x",
            (SpecChunk::K2, true, false) => "qsa_topk_spec_2k_lean",
            (SpecChunk::K4, true, false) => "qsa_topk_spec_lean",
            (SpecChunk::K8, true, false) => "qsa_topk_spec_8k_lean",
            (SpecChunk::K4, false, true) => "qsa_topk_spec_x",
            (SpecChunk::K8, false, true) => "qsa_topk_spec_8k_x",
            (chunk, _, _) => chunk.kernel(),
        }
    }
    /// Threads per CTA (the chunk holds `chunk / threads` entries per thread).
    pub fn threads(self) -> u32 {
        if self.wide_cta {
            1024
        } else {
            512
        }
    }
    /// TOPK_SPEC_* of kernels/common/topk_spec.h: FINAL_WINDOW 1, BOUND_WINDOW 2, LOAD_VEC4 4,
    /// FENCE_ONE 8, BOUND_TMAX 16, FINAL_LEAN 32.
    pub fn flags(self) -> i32 {
        (self.final_window as i32)
            | (self.bound_window as i32) << 1
            | (self.vec4 as i32) << 2
            | (self.fence_one as i32) << 3
            | (self.bound_tmax as i32) << 4
            | (self.final_lean as i32) << 5
    }
}

/// A two-valued switch: `off` (or unset: `default`) / `on`; anything else is an error that
/// names the values.
fn choice(
    sw: &Switches,
    name: &str,
    off: &str,
    on: &str,
    default: bool,
) -> Result<bool, BackendError> {
    match sw.get(name) {
        None => Ok(default),
        Some(v) if v == off => Ok(false),
        Some(v) if v == on => Ok(true),
        Some(v) => Err(BackendError::Input(format!(
            "{name}={v}: expected {off} or {on}"
        ))),
    }
}

/// The speculative kernel's options for `s` from the QSA_TOPK_SPEC_* switches (unset: the
/// engine's defaults: every flag on, each measured faster on the H200 at 1 / 3 / 16 queries x
/// 262,144, k = 2048, 2026-12-02 06:07 UTC, side by side: the windowed final 17.5 -> 16.0 /
/// 21.0 -> 19.0 / 41.6 -> 39.5 us, the one-pass bound -> 16.6 / 19.9 / 37.6, vec4 loads
/// alone level (17.5 / 20.7 / 41.5), all three 15.1 / 18.1 / 36.3; the lean chunk step and
/// the chunk: `SpecChunk::engine`). Session 8's forms (fence, tmax, window_lean, 1,024
/// threads, the float step) are off unless set, except sm_90's default (the float step with
/// thread 0's fences and window_lean: `float_by_default`, measured in call F1).
///
/// The variants exist on NVIDIA targets only (kernels/topk.cu builds them for CUDA; AMD's
/// dispatch never takes the speculative kernel, and their registers cost gfx906's forced
/// one an occupancy step): elsewhere a forced speculative kernel runs its plain form, as a
/// forced kernel outside its limits falls through to one that handles the shape.
/// Whether `spec_options` fills in sm_90's default chunk step (its comment): sm_90+, none of
/// the step's switches set, the engine's chunk one the float step exists for, and rows of at
/// least `FLOAT_MIN_KEYS_PER_K` keys per selected id. The golden run of call F3 (H200,
/// 2026-12-02) measured the float step at 3 x 40,000 (19.5 keys per id) 2.46x slower than the
/// golden (50.0 against 20.3 us; its chunk bounds keep too little and the last CTA falls
/// back), level at 3 x 65,536 (32 per id: 20.5 against 20.5) and faster from 131,072 up.
fn float_by_default(caps: &TargetCaps, sw: &Switches, s: TopkShape) -> bool {
    const STEP: [&str; 6] = [
        "QSA_TOPK_SPEC_KEEP",
        "QSA_TOPK_SPEC_FENCE",
        "QSA_TOPK_SPEC_FINAL",
        "QSA_TOPK_SPEC_BOUND",
        "QSA_TOPK_SPEC_THREADS",
        "QSA_TOPK_SPEC_CHUNK",
    ];
    caps.has(Feature::Clusters)
        && STEP.iter().all(|k| sw.get(k).is_none())
        && matches!(SpecChunk::engine(caps, s), SpecChunk::K4 | SpecChunk::K8)
        && s.n >= FLOAT_MIN_KEYS_PER_K * s.k
}

/// `float_by_default`'s line: 32 keys per selected id (its comment has the measurements).
const FLOAT_MIN_KEYS_PER_K: usize = 32;

pub fn spec_options(
    caps: &TargetCaps,
    sw: &Switches,
    s: TopkShape,
) -> Result<SpecOptions, BackendError> {
    if caps.vendor != Vendor::Nvidia {
        return Ok(SpecOptions {
            chunk: SpecChunk::K4,
            final_window: false,
            bound_window: false,
            vec4: false,
            lean: false,
            fence_one: false,
            bound_tmax: false,
            final_lean: false,
            wide_cta: false,
            float_keep: false,
        });
    }
    // sm_90's default since session 8 (call F1, 2026-12-02, bench/topk_vs_torch.py --quick,
    // H200, same run): the float chunk step with thread 0's fences and the final step's plain
    // atomic adds (`floatX`) ran 1 / 3 / 16 queries x 262,144 in 13.3 / 14.3 / 24.7 us against
    // the lean step's 14.0 / 15.3 / 27.1 (FlashInfer 20.0 / 20.4 / 31.7), ids exact. Filled in
    // only where none of the step's switches is set and the engine's chunk has the float
    // entry points (4,096 / 8,192), so every forced form still means what it says; measured
    // on sm_90 only, so other targets keep the lean step.
    let filled;
    let sw = if float_by_default(caps, sw, s) {
        filled = sw.with(&[
            ("QSA_TOPK_SPEC_KEEP", "float"),
            ("QSA_TOPK_SPEC_FENCE", "one"),
            ("QSA_TOPK_SPEC_FINAL", "window_lean"),
        ]);
        &filled
    } else {
        sw
    };
    let wide_cta = match sw.get("QSA_TOPK_SPEC_THREADS") {
        None | Some("512") => false,
        Some("1024") => true,
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_SPEC_THREADS={other}: expected 512 or 1024 (unset: 512)"
            )))
        }
    };
    let chunk = match sw.get("QSA_TOPK_SPEC_CHUNK") {
        None if wide_cta => SpecChunk::K8,
        None => SpecChunk::engine(caps, s),
        Some("2048") => SpecChunk::K2,
        Some("4096") => SpecChunk::K4,
        Some("8192") => SpecChunk::K8,
        Some("16384") => SpecChunk::K16,
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_SPEC_CHUNK={other}: expected 2048, 4096, 8192 or 16384 (unset: the engine's rule)"
            )))
        }
    };
    let (explicit_lean, float_keep) = match sw.get("QSA_TOPK_SPEC_KEEP") {
        None => (None, false),
        Some("general") => (Some(false), false),
        Some("lean") => (Some(true), false),
        Some("float") => (Some(true), true),
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_SPEC_KEEP={other}: expected general, lean or float (unset: lean where it exists)"
            )))
        }
    };
    let lean = explicit_lean.unwrap_or(false);
    if lean && chunk == SpecChunk::K16 {
        return Err(BackendError::Input(
            "QSA_TOPK_SPEC_KEEP=lean exists for chunks of 2048, 4096 and 8192 only, not 16384: set QSA_TOPK_SPEC_CHUNK=2048, 4096 or 8192".into(),
        ));
    }
    // Three-valued: each names the values.
    let (final_window, final_lean) = match sw.get("QSA_TOPK_SPEC_FINAL") {
        Some("byte") => (false, false),
        None | Some("window") => (true, false),
        Some("window_lean") => (true, true),
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_SPEC_FINAL={other}: expected byte, window or window_lean (unset: window)"
            )))
        }
    };
    // tmax keeps the one-pass bound for chunks whose margin exceeds the CTA's threads. The
    // float step's bound is always the threads' maxima.
    let (bound_window, bound_tmax) = match sw.get("QSA_TOPK_SPEC_BOUND") {
        None | Some("tmax") if float_keep => (true, true),
        Some(other) if float_keep => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_SPEC_BOUND={other} with QSA_TOPK_SPEC_KEEP=float: the float step's bound is the threads' maxima; unset QSA_TOPK_SPEC_BOUND or set tmax"
            )))
        }
        Some("radix") => (false, false),
        None | Some("window") => (true, false),
        Some("tmax") => (true, true),
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_SPEC_BOUND={other}: expected radix, window or tmax (unset: window)"
            )))
        }
    };
    let fence_one = choice(sw, "QSA_TOPK_SPEC_FENCE", "all", "one", false)?;
    let x = fence_one || bound_tmax || final_lean;
    // Unset: the lean step wherever an entry point has it for the other choices (chunks of
    // 4,096 and 8,192; with session 8's forms only beside the threads' maxima bound):
    // measured faster than the general step at 1 / 3 / 16 queries (`engine` above).
    let lean = explicit_lean.unwrap_or(chunk != SpecChunk::K16 && (bound_tmax || !(x || wide_cta)));
    if float_keep && (wide_cta || !matches!(chunk, SpecChunk::K4 | SpecChunk::K8)) {
        return Err(BackendError::Input(format!(
            "QSA_TOPK_SPEC_KEEP=float exists for 512-thread chunks of 4096 and 8192, not {}{}: set QSA_TOPK_SPEC_CHUNK=4096 or 8192 and unset QSA_TOPK_SPEC_THREADS",
            chunk.entries(),
            if wide_cta { " with 1024 threads" } else { "" }
        )));
    }
    if wide_cta && chunk != SpecChunk::K8 {
        return Err(BackendError::Input(format!(
            "QSA_TOPK_SPEC_THREADS=1024 exists for chunks of 8192, not {}: unset QSA_TOPK_SPEC_CHUNK (or set 8192)",
            chunk.entries()
        )));
    }
    if x && !matches!(chunk, SpecChunk::K4 | SpecChunk::K8) {
        return Err(BackendError::Input(format!(
            "QSA_TOPK_SPEC_FENCE=one, QSA_TOPK_SPEC_BOUND=tmax and QSA_TOPK_SPEC_FINAL=window_lean exist for chunks of 4096 and 8192, not {}: set QSA_TOPK_SPEC_CHUNK=4096 or 8192",
            chunk.entries()
        )));
    }
    // The lean entry points with session 8's forms carry the threads' maxima bound only.
    if lean && (x || wide_cta) && !bound_tmax {
        return Err(BackendError::Input(
            "QSA_TOPK_SPEC_KEEP=lean with QSA_TOPK_SPEC_FENCE=one, QSA_TOPK_SPEC_FINAL=window_lean or QSA_TOPK_SPEC_THREADS=1024 exists with QSA_TOPK_SPEC_BOUND=tmax only: set it".into(),
        ));
    }
    Ok(SpecOptions {
        chunk,
        lean,
        final_window,
        bound_window,
        vec4: choice(sw, "QSA_TOPK_SPEC_LOAD", "scalar", "vec4", true)?,
        fence_one,
        bound_tmax,
        final_lean,
        wide_cta,
        float_keep,
    })
}

#[cfg(test)]
#[path = "topk_tests.rs"]
mod tests;

//! Top-k dispatch: register kernel for small n, two-stage split for decode (the one-launch
//! speculative kernel on sm_90, measured faster there), wide otherwise.
//! The one-launch cluster kernel (sm_90) runs only when forced (`QSA_TOPK_KERNEL=cluster`):
//! on the H200 it is slower than the split (docs/results/topk-cluster-2026-12-01/).

use super::{Switches, TargetCaps, Vendor};
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
/// CTAs of one query's cluster (TOPK_CLUSTER in kernels/topk.cu; 8 is the portable size).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Feature;

    fn nvidia(features: Vec<Feature>) -> TargetCaps {
        TargetCaps {
            name: "sm_test".into(),
            vendor: Vendor::Nvidia,
            wave: 32,
            shared_per_block: 232_448,
            multiprocessors: 132,
            features,
        }
    }

    /// The switches of a matrix variant that forces `kernel`.
    fn forced(kernel: &str) -> Switches {
        Switches::new([("QSA_TOPK_KERNEL".to_string(), kernel.to_string())].into())
    }

    fn decode(nq: usize, n: usize) -> TopkShape {
        TopkShape {
            nq,
            n,
            k: 2048,
            has_active: false,
        }
    }

    #[test]
    fn the_engines_dispatch_never_takes_the_cluster_kernel() {
        // Measured slower than the split on the H200 (docs/results/topk-cluster-2026-12-01/):
        // decode takes the speculative kernel there, the split on other NVIDIA targets.
        let sw = Switches::default();
        let hopper = nvidia(vec![Feature::Clusters]);
        let pick = |s| choose(&hopper, &sw, s).unwrap();
        assert_eq!(pick(decode(16, 262_144)), TopkKernel::Spec);
        assert_eq!(pick(decode(1, CLUSTER_MAX_N)), TopkKernel::Spec);
        assert_eq!(pick(decode(17, 262_144)), TopkKernel::Wide);
        assert_eq!(pick(decode(1, REGISTER_MAX_N)), TopkKernel::Register);
        let ampere = nvidia(vec![]);
        assert_eq!(
            choose(&ampere, &sw, decode(16, 262_144)).unwrap(),
            TopkKernel::Split
        );
    }

    #[test]
    fn a_forced_spec_kernel_takes_decode_only() {
        let sw = forced("spec");
        let ampere = nvidia(vec![]);
        assert_eq!(
            choose(&ampere, &sw, decode(3, 40_000)).unwrap(),
            TopkKernel::Spec
        );
        let prefill = TopkShape {
            has_active: true,
            ..decode(3, 40_000)
        };
        assert_eq!(choose(&ampere, &sw, prefill).unwrap(), TopkKernel::Wide);
    }

    #[test]
    fn a_forced_cluster_kernel_falls_back_where_it_cannot_run() {
        let sw = forced("cluster");
        let hopper = nvidia(vec![Feature::Clusters]);
        let ampere = nvidia(vec![]);
        assert_eq!(
            choose(&hopper, &sw, decode(3, 40_000)).unwrap(),
            TopkKernel::Cluster
        );
        let prefill = TopkShape {
            has_active: true,
            ..decode(3, 40_000)
        };
        assert_eq!(
            choose(&hopper, &sw, prefill).unwrap(),
            TopkKernel::Cluster,
            "the kernel clamps per-query active counts like the others"
        );
        assert_eq!(
            choose(&ampere, &sw, decode(3, 40_000)).unwrap(),
            TopkKernel::Wide
        );
        assert_eq!(
            choose(&hopper, &sw, decode(3, CLUSTER_MAX_N + 1)).unwrap(),
            TopkKernel::Wide
        );
    }
}

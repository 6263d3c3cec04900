//! Top-k dispatch: register kernel for small n, two-stage split for decode, wide otherwise.

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
}

impl TopkKernel {
    pub fn name(self) -> &'static str {
        match self {
            TopkKernel::Register => "register",
            TopkKernel::Wide => "wide",
            TopkKernel::Split => "split",
        }
    }
}

/// Largest n the register kernel holds (entries per query).
pub const REGISTER_MAX_N: usize = 8192;
/// Largest chunk of the split's stage A.
pub const SPLIT_CHUNK: usize = 4096;
/// Most queries for which the split pays (past that, one CTA per query fills the GPU).
pub const SPLIT_MAX_QUERIES: usize = 16;
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
        Some(other) => {
            return Err(BackendError::Input(format!(
                "QSA_TOPK_KERNEL={other}: expected register, wide or split"
            )))
        }
        None => None,
    };
    if let Some(kernel) = forced {
        // A forced kernel outside its limits falls through to one that handles the shape.
        return Ok(match kernel {
            TopkKernel::Register if s.n > REGISTER_MAX_N => TopkKernel::Wide,
            TopkKernel::Split if s.has_active => TopkKernel::Wide,
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
    Ok(if decode && split_enabled {
        TopkKernel::Split
    } else {
        TopkKernel::Wide
    })
}

//! Selection-attention dispatch: the staged kernel (shared-memory / LDS staging, sized from
//! the target's limit) unless the straightforward gather kernel is forced.

use super::{Switches, TargetCaps};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnKernel {
    /// Straightforward gather from global memory: the error baseline.
    Gather,
    /// K/V blocks staged once in shared memory / LDS for every head of the GQA group.
    Staged,
}

impl AttnKernel {
    pub fn name(self) -> &'static str {
        match self {
            AttnKernel::Gather => "gather",
            AttnKernel::Staged => "staged",
        }
    }
}

pub fn choose(_caps: &TargetCaps, sw: &Switches) -> AttnKernel {
    match sw.get("QSA_ATTN_KERNEL") {
        Some("gather") => AttnKernel::Gather,
        _ => AttnKernel::Staged,
    }
}

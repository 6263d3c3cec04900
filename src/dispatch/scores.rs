//! Block-score dispatch: tensor cores where the target has them, the FP32 tiled SIMT kernel
//! below sm_80 and where tensor cores are switched off, the warp kernel when forced.

use super::{Feature, Switches, TargetCaps, Vendor};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoresKernel {
    /// One warp per dot product, shuffle reduction: the baseline.
    Warp,
    /// FP32 tiled SIMT GEMM: each thread 2 queries x 4 heads x 4 blocks, K through shared.
    Simt,
    /// TF32 tensor cores (NVIDIA sm_80+); on AMD the matrix-core equivalent is not built yet.
    Tf32,
    /// BF16 tensor cores, opt-in (STRATA_BF16_TC=1).
    Bf16,
}

impl ScoresKernel {
    pub fn name(self) -> &'static str {
        match self {
            ScoresKernel::Warp => "warp",
            ScoresKernel::Simt => "simt",
            ScoresKernel::Tf32 => "tf32",
            ScoresKernel::Bf16 => "bf16",
        }
    }
}

pub fn choose(caps: &TargetCaps, sw: &Switches) -> ScoresKernel {
    let simt_off = sw.off("STRATA_SELECT_SIMT") || sw.on("STRATA_SELECT_OLD");
    let tc_off = sw.on("STRATA_QSA_WARP") || sw.on("STRATA_SELECT_OLD");
    let nvidia_tc = caps.vendor == Vendor::Nvidia && caps.has(Feature::Tf32Tc);
    if !tc_off && nvidia_tc {
        if sw.on("STRATA_BF16_TC") && caps.has(Feature::Bf16Tc) {
            return ScoresKernel::Bf16;
        }
        return ScoresKernel::Tf32;
    }
    if simt_off {
        ScoresKernel::Warp
    } else {
        ScoresKernel::Simt
    }
}

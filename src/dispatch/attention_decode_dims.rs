//! QSA_ATTN_DEC_DIMS: how a decode warp's P·V covers the head dimension. `whole` (the default):
//! every warp streams its own units and forms all 128 dims of O. `half` (the `_hd_` kernels,
//! kernels/common/attention_decode.h's HD): warps 2p and 2p + 1 stream the same units, both form
//! S = q K^T, and warp 2p + h forms O's dims [64 h, 64 h + 64) only. Each warp's mma per unit drop
//! from 64 to 40 and its O accumulators from 64 registers to 32 (sm_90: 124 registers against
//! 166), and the CTA merge sums warps / 2 partials, half the shared bytes. Issue 13's question:
//! whether the 16-query decode's time past its copies (the last units' math and the CTA merge,
//! about 3.8 us of 22.4 in session 19) shrinks by more than the pair's repeated q K^T costs.

use super::attention_decode::DecMerge;
use super::Switches;
use crate::backend::BackendError;

/// Whether O's dims are split over warp pairs when QSA_ATTN_DEC_DIMS is unset. Flip rule (set
/// before the runs, as session 11's): >= 0.5 us faster than auto at 16 queries for groups 16 and
/// 8 in one run of bench/attention_vs_torch.py --decode-sweep hd, and the H200 check exact.
const DEFAULT_HALF: bool = false;

/// QSA_ATTN_DEC_DIMS asked for `half` (checked against the plan by [`half_dims`]).
pub fn asked_half(sw: &Switches) -> Result<bool, BackendError> {
    match sw.get("QSA_ATTN_DEC_DIMS") {
        None => Ok(DEFAULT_HALF),
        Some("whole") => Ok(false),
        Some("half") => Ok(true),
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_DIMS={}: expected whole or half (whether a warp pair splits O's head dimension)",
            crate::echo::value(v)
        ))),
    }
}

/// The plan's `half_dims` bit. The `_hd_` kernels are the one-unit, static-order cp.async loop on
/// an even number of warps, per item with each warp loading q (ticket or launch merge), or as a
/// cluster with q staged per CTA (the pull merge): asked for with another form, refused.
pub fn half_dims(
    sw: &Switches,
    warps: usize,
    merge: DecMerge,
    pair: bool,
    dynamic: bool,
    q_cta: bool,
    bulk: bool,
) -> Result<bool, BackendError> {
    if !asked_half(sw)? {
        return Ok(false);
    }
    let other = if warps % 2 != 0 {
        Some(format!(
            "QSA_ATTN_DEC_WARPS={warps} (warp pairs: an even count)"
        ))
    } else if pair {
        Some("QSA_ATTN_DEC_PAIR=1".to_string())
    } else if dynamic {
        Some("QSA_ATTN_DEC_ORDER=dynamic".to_string())
    } else if bulk {
        Some("QSA_ATTN_DEC_COPY=bulk".to_string())
    } else if matches!(merge, DecMerge::Push | DecMerge::Flat | DecMerge::Lean) {
        Some(format!("the {merge:?} merge"))
    } else if merge == DecMerge::Cluster && !q_cta {
        Some("the cluster merge with each warp loading q (QSA_ATTN_DEC_QLOAD=warp)".to_string())
    } else if merge != DecMerge::Cluster && q_cta {
        Some("QSA_ATTN_DEC_QLOAD=cta without the cluster merge".to_string())
    } else {
        None
    };
    match other {
        None => Ok(true),
        Some(o) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_DIMS=half has no kernel for {o} (drop that switch or the dims split)"
        ))),
    }
}

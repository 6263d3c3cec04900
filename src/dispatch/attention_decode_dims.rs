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
/// Session 20's call A (H200, 2026-12-04, docs/results/session20-2026-12-04/a/: exact, 0 errors
/// and 0 hazards under the three sanitizers) measured it slower everywhere (medians in us, two
/// runs, auto / half): 16 q g16 22.5-22.6 / 29.4-29.6, g8 22.0-22.1 / 29.5-29.7; 1 q g16 6.9-7.0 /
/// 7.9, g8 6.6 / 7.6-7.8. Its probes say why: the math alone (probe=no_kv) 18.2-18.4 against
/// auto's 12.2-12.4 (40 mma a unit over twice the units: the pair repeats q K^T and the softmax),
/// the copies alone (probe=no_math) 23.2-23.6 against 20.1-20.8 (K fetched twice through L2, V's
/// half by half the lanes), and one query's CTA merge no shorter with half the partials (probes
/// loop to cta: 1.0-1.5 us against auto's 1.2): that merge is bound by its chain of latencies,
/// not by its shared-memory bytes.
const DEFAULT_HALF: bool = false;

/// QSA_ATTN_DEC_DIMS as asked: Some(true) for `half`, Some(false) for `whole`, None unset.
fn asked(sw: &Switches) -> Result<Option<bool>, BackendError> {
    match sw.get("QSA_ATTN_DEC_DIMS") {
        None => Ok(None),
        Some("whole") => Ok(Some(false)),
        Some("half") => Ok(Some(true)),
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_DIMS={}: expected whole or half (whether a warp pair splits O's head dimension)",
            crate::echo::value(v)
        ))),
    }
}

/// Whether the plan may split O's dims (the switch, or the default): the ring's depth counts a
/// pair's units (the form itself is settled by [`half_dims`]).
pub fn maybe_half(sw: &Switches) -> Result<bool, BackendError> {
    Ok(asked(sw)?.unwrap_or(DEFAULT_HALF))
}

/// The plan's `half_dims` bit. The `_hd_` kernels are the one-unit, static-order cp.async loop on
/// an even number of warps, per item with each warp loading q (ticket or launch merge), or as a
/// cluster with q staged per CTA (the pull merge): asked for with another form, refused; as a
/// default (DEFAULT_HALF), those forms keep whole dims.
pub fn half_dims(
    sw: &Switches,
    warps: usize,
    merge: DecMerge,
    pair: bool,
    dynamic: bool,
    q_cta: bool,
    bulk: bool,
) -> Result<bool, BackendError> {
    let other = if !warps.is_multiple_of(2) {
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
    match (asked(sw)?, other) {
        (None, other) => Ok(DEFAULT_HALF && other.is_none()),
        (Some(false), _) => Ok(false),
        (Some(true), None) => Ok(true),
        (Some(true), Some(o)) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_DIMS=half has no kernel for {o} (drop that switch or the dims split)"
        ))),
    }
}

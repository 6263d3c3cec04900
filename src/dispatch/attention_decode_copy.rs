//! QSA_ATTN_DEC_COPY: how the decode forward's K/V rows reach each warp's ring. `cp_async`
//! (the default): each lane's 16-byte cp.async, 16 per lane per 16-key unit. `bulk` (the `_bk_`
//! kernels, kernels/common/attention_decode_unit.h dec_issue_bulk): one cp.async.bulk (the TMA's
//! unit-stride copy) per 256-byte row, lane l fetching row l % 16 of K or V, completing on one
//! mbarrier per warp stage; sm_90a only (Feature::Wgmma: the code object with mbarrier.h's
//! instructions). Issue 13's question: whether the 16-query decode's copy floor (20.9 us of
//! 22.3-22.7, H200 session 11, `QSA_ATTN_DEC_PROBE=no_math`) is the per-thread copies' cost
//! (the decode scorer went from 68% to 76% of HBM when its tiles came by cp.async.bulk).

use super::attention_decode::DecMerge;
use super::{Feature, Switches, TargetCaps};
use crate::backend::BackendError;

/// Bytes of one mbarrier (one per warp and ring stage, past the kernel's other shared data).
pub const MBAR_BYTES: usize = 8;

/// Whether the rows come by cp.async.bulk when QSA_ATTN_DEC_COPY is unset. The flip rule
/// (docs/results/session12-2026-12-03/plans/dectma.md): >= 0.5 us faster than auto at 16 queries,
/// group 8 and group 16, in one run of bench/attention_vs_torch.py --decode-sweep bulk. Session
/// 13's call B (H200, 2026-12-03) measured it slower: 25.4 / 24.9 us against auto's 22.6 / 22.2
/// (g16 / g8), with the same copy floor (probe=no_math 20.7 / 20.2 against 20.8 / 20.4 us).
const DEFAULT_BULK: bool = false;

/// QSA_ATTN_DEC_COPY=bulk's plan bit. The `_bk_` kernels are the one-unit, static-order loop with
/// each warp loading q, merged by the ticket, a second launch or the pull cluster merge: asked
/// for with another form, or where sm_90a's code is not built, refused; as a default
/// (DEFAULT_BULK), those calls keep cp.async.
pub fn bulk(
    caps: &TargetCaps,
    sw: &Switches,
    merge: DecMerge,
    pair: bool,
    dynamic: bool,
    q_cta: bool,
) -> Result<bool, BackendError> {
    let other = if pair {
        Some("QSA_ATTN_DEC_PAIR=1")
    } else if dynamic {
        Some("QSA_ATTN_DEC_ORDER=dynamic")
    } else if q_cta {
        Some("QSA_ATTN_DEC_QLOAD=cta")
    } else if merge == DecMerge::Push {
        Some("QSA_ATTN_DEC_MERGE=push")
    } else if merge == DecMerge::Flat {
        Some("QSA_ATTN_DEC_MERGE=flat")
    } else if merge == DecMerge::Lean {
        Some("QSA_ATTN_DEC_MERGE=lean")
    } else if sw.get("QSA_ATTN_DEC_PREFETCH") == Some("256") {
        Some("QSA_ATTN_DEC_PREFETCH=256 (a cp.async prefetch size)")
    } else {
        None
    };
    let built = caps.has(Feature::Wgmma);
    match sw.get("QSA_ATTN_DEC_COPY") {
        None => Ok(DEFAULT_BULK && built && other.is_none()),
        Some("cp_async") => Ok(false),
        Some("bulk") if !built => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_COPY=bulk needs sm_90a's cp.async.bulk and mbarriers (feature wgmma), \
             which {} lacks",
            caps.name
        ))),
        Some("bulk") => match other {
            None => Ok(true),
            Some(o) => Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_COPY=bulk has no {o} kernel (drop that switch or the copy form)"
            ))),
        },
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_COPY={}: expected cp_async or bulk (how K/V rows reach the warps' rings)",
            crate::echo::value(v)
        ))),
    }
}

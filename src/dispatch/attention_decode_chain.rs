//! QSA_ATTN_DEC_CTAMERGE: how a decode CTA's warps merge their partials. `pull` (the default,
//! dec_cta_merge): after the last warp's loop, every warp stores its partial, three CTA barriers,
//! then every output summed over the warps. `chain` (the `_ch_` kernels, dec_chain_merge; sm_90a:
//! named barriers): each warp folds its partial into the CTA's running one as its loop ends, in
//! ticket order, so only the last warp's fold follows the last loop. Issue 13's question: whether
//! the 16-query decode's 1.3-1.5 us of CTA merge on its critical CTA (session 20's timeline:
//! a CTA's warps end their loops a median 1.0 us apart) shrinks to one fold.

use super::attention_decode::DecMerge;
use super::{Feature, Switches, TargetCaps};
use crate::backend::BackendError;

/// Bytes of the chain's running partial past the ring (DEC_MERGE_FLOATS x 4: m[16], l[16],
/// O[16][128]).
pub const CHAIN_BYTES: usize = (2 * 16 + 16 * 128) * 4;

/// Whether the chain merge runs when QSA_ATTN_DEC_CTAMERGE is unset. Flip rule (set before the
/// runs): >= 0.5 us faster than auto at 16 queries for groups 16 and 8 in one run of
/// bench/attention_vs_torch.py --decode-sweep chain, and the H200 check exact and
/// sanitizer-clean.
const DEFAULT_CHAIN: bool = false;

/// The plan's `chain` bit. The `_ch_` kernels are the one-unit, static-order cp.async loop with
/// each warp loading q and whole dims, one CTA per item, on sm_90a's code object (named
/// barriers): asked for with another form, refused; as a default (DEFAULT_CHAIN), those forms
/// keep the pull merge.
#[allow(clippy::too_many_arguments)]
pub fn chain(
    caps: &TargetCaps,
    sw: &Switches,
    nsplit: usize,
    merge: DecMerge,
    pair: bool,
    dynamic: bool,
    q_cta: bool,
    bulk: bool,
    half_dims: bool,
) -> Result<bool, BackendError> {
    let other = if nsplit != 1 || merge.clustered() {
        Some(format!("{nsplit} splits per item (one CTA per item only)"))
    } else if pair {
        Some("QSA_ATTN_DEC_PAIR=1".to_string())
    } else if dynamic {
        Some("QSA_ATTN_DEC_ORDER=dynamic".to_string())
    } else if q_cta {
        Some("QSA_ATTN_DEC_QLOAD=cta".to_string())
    } else if bulk {
        Some("QSA_ATTN_DEC_COPY=bulk".to_string())
    } else if half_dims {
        Some("QSA_ATTN_DEC_DIMS=half".to_string())
    } else {
        None
    };
    let built = caps.has(Feature::Wgmma);
    match sw.get("QSA_ATTN_DEC_CTAMERGE") {
        None => Ok(DEFAULT_CHAIN && built && other.is_none()),
        Some("pull") => Ok(false),
        Some("chain") if !built => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_CTAMERGE=chain needs sm_90a's named barriers (feature wgmma), which {} lacks",
            caps.name
        ))),
        Some("chain") => match other {
            None => Ok(true),
            Some(o) => Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_CTAMERGE=chain has no kernel for {o} (drop that switch or the chain merge)"
            ))),
        },
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_CTAMERGE={}: expected pull or chain (how a CTA's warps merge their partials)",
            crate::echo::value(v)
        ))),
    }
}

//! The wgmma backward's query ranges (`QSA_ATTN_KV_QCHUNK`, `qchunk` in
//! kernels/common/attention_kv_wg.h's `kwg_bwd`).
//!
//! With one CTA per (batch, KV head, block) walking every query that selected its block, the
//! 132 CTAs resident on the H200 add dQ rows spread over the whole sequence (34 GB of f32
//! atomics at the issue-13 prefill shape: every (token, head) once per selected block; 12.6 of
//! kvwg2a3's 56.7 ms in session 16's leave-one-out build). With ranges, the CTAs resident
//! together work on one (batch, KV head, range of `qchunk` tokens): the dQ rows they add to
//! and the q / dO rows they read are `qchunk` x 20 KB at 16 heads per KV head. The price: each
//! block's dK / dV is summed over the ranges with float4 atomics into the zero-filled dk / dv,
//! and K / V are loaded once per range.
//!
//! Measured (H200, `bench/attn_bwd_forms.py`, B=4, T=16K, 64 / 4 heads, 16 blocks of 64;
//! docs/results/session17-2026-12-03/), backward medians in ms:
//!
//! | ranges | dQ last (call A) | dQ last (calls B, C) | dQ first (call C) | dQ first (call E) |
//! |---|---|---|---|---|
//! | none | 56.26, 57.32 again | 56.43-56.75, 56.21-56.58 | 55.64, 55.76 | 57.25 |
//! | 256 | 62.66 | | | |
//! | 512 | 58.06 | | | |
//! | 1,024 | 55.75 | | | 53.82 |
//! | 2,048 | 55.08 | 55.35-55.45, 54.97-55.34 | **53.24, 53.29** | **53.33, 53.73 again** |
//! | 4,096 | 55.26 | | | 53.51 |
//! | 8,192 | | | | 57.81 |
//!
//! fla's backward 48.8-49.2 in every run. Ranges alone buy 2%: dQ's atomics were not costing
//! HBM misses. With dQ's products first in the tile (kernels/common/attention_kv_wg.h), its
//! atomics drain during dV / dK, and the ranges' L2 locality then pays: -5.6% against the
//! committed kernel of call C's runs (56.21-57.01), past the 3% flip rule.

use super::attention::BwdPath;
use super::attention_kv::KvProducts;
use crate::backend::BackendError;

/// The wgmma backward's query range where `QSA_ATTN_KV_QCHUNK` is unset: the best of the table
/// above. Shapes of no more queries run as one range (the kernel as before ranges).
pub const KV_WG_DEFAULT_QCHUNK: usize = 2048;

/// The query range of `QSA_ATTN_KV_QCHUNK` (unset: `KV_WG_DEFAULT_QCHUNK`) for a wgmma-form
/// backward of `q_len` queries: None (one CTA per block over every query) when `off` or no
/// smaller than `q_len`; None
/// too where the call does not take the wgmma form though `QSA_ATTN_KV_MMA` does not name
/// another (f16 inputs keep the tf32 kernel whole, as every wgmma form; the default path
/// takes the split kernel on short grids): the switch applies where the form runs, and the
/// dispatch snapshot names the kernel that does.
/// A value that is not a positive multiple of 64 tokens, or a range asked with
/// `QSA_ATTN_KV_MMA` naming a kernel without ranges, is an input error naming the fix.
/// Only the fused pass (`BwdPath::KvFused`) has ranges: every other `path` takes None.
pub fn kv_qchunk(
    sw: &super::Switches,
    path: BwdPath,
    kv: KvProducts,
    q_len: usize,
) -> Result<Option<usize>, BackendError> {
    if path != BwdPath::KvFused {
        return Ok(None);
    }
    let tokens = match sw.get("QSA_ATTN_KV_QCHUNK") {
        None => KV_WG_DEFAULT_QCHUNK,
        Some("off") => return Ok(None),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 && n % 64 == 0 && n <= i32::MAX as usize => n,
            _ => {
                return Err(BackendError::Input(format!(
                    "QSA_ATTN_KV_QCHUNK={}: expected off or a positive multiple of 64 tokens \
                     (for example 1024)",
                    crate::echo::value(v)
                )))
            }
        },
    };
    let names_other = sw.get("QSA_ATTN_KV_QCHUNK").is_some()
        && sw
            .get("QSA_ATTN_KV_MMA")
            .is_some_and(|m| !m.starts_with("wg"));
    if kv.wg == 0 && !names_other {
        return Ok(None);
    }
    if kv.wg == 0 {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_KV_QCHUNK={tokens}: query ranges are the wgmma backward's \
             (qsa_attn_kvwg*_dq_bwd_bf16); this call takes qsa_attn_{}, which walks every \
             query per block (QSA_ATTN_KV_MMA={}). Unset one of the two, or pick a wgmma \
             form (QSA_ATTN_KV_MMA=wg2a)",
            kv.stem(),
            crate::echo::value(sw.get("QSA_ATTN_KV_MMA").unwrap_or(""))
        )));
    }
    Ok((tokens < q_len).then_some(tokens))
}

/// Query ranges of `qchunk` tokens over `q_len` (1 without ranges).
pub fn ranges(q_len: usize, qchunk: Option<usize>) -> usize {
    qchunk.map_or(1, |n| q_len.div_ceil(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::Switches;

    fn wg2a3() -> KvProducts {
        KvProducts {
            wg: 4,
            ..KvProducts::KV16S
        }
    }

    fn qchunk_with(
        mma: &str,
        v: &str,
        kv: KvProducts,
        q_len: usize,
    ) -> Result<Option<usize>, String> {
        let sw = Switches::from_pairs(&[("QSA_ATTN_KV_QCHUNK", v), ("QSA_ATTN_KV_MMA", mma)]);
        kv_qchunk(&sw, BwdPath::KvFused, kv, q_len).map_err(|e| e.to_string())
    }

    fn qchunk(v: &str, kv: KvProducts, q_len: usize) -> Result<Option<usize>, String> {
        qchunk_with("wg2a", v, kv, q_len)
    }

    #[test]
    fn a_range_shorter_than_the_queries_splits_them() {
        assert_eq!(qchunk("1024", wg2a3(), 16384), Ok(Some(1024)));
        assert_eq!(ranges(16384, Some(1024)), 16);
        assert_eq!(ranges(16385, Some(1024)), 17);
        // As long as the queries, or off: one range, the kernel's plain dK / dV stores.
        assert_eq!(qchunk("16384", wg2a3(), 16384), Ok(None));
        assert_eq!(qchunk("off", wg2a3(), 16384), Ok(None));
        assert_eq!(ranges(16384, None), 1);
    }

    #[test]
    fn unset_takes_the_measured_default_range_where_it_splits() {
        let sw = Switches::default();
        assert_eq!(
            kv_qchunk(&sw, BwdPath::KvFused, wg2a3(), 16384).ok(),
            Some(Some(KV_WG_DEFAULT_QCHUNK))
        );
        assert_eq!(
            kv_qchunk(&sw, BwdPath::KvFused, wg2a3(), KV_WG_DEFAULT_QCHUNK).ok(),
            Some(None)
        );
        // Kernels without ranges (the split kernel, tf32) take none, without an error, even
        // where QSA_ATTN_KV_MMA names them: only a set QSA_ATTN_KV_QCHUNK is refused there.
        let bf16s = Switches::from_pairs(&[("QSA_ATTN_KV_MMA", "bf16s")]);
        assert_eq!(
            kv_qchunk(&bf16s, BwdPath::KvFused, KvProducts::KV16S, 16384).ok(),
            Some(None)
        );
    }

    #[test]
    fn bad_values_and_kernels_without_ranges_are_refused_with_the_fix() {
        for bad in ["0", "100", "-64", "1k", ""] {
            let err = qchunk(bad, wg2a3(), 16384).unwrap_err();
            assert!(err.contains("positive multiple of 64"), "{bad}: {err}");
        }
        let err = qchunk_with("bf16s", "1024", KvProducts::KV16S, 16384).unwrap_err();
        assert!(
            err.contains("qsa_attn_kv16s") && err.contains("QSA_ATTN_KV_MMA=wg2a"),
            "{err}"
        );
    }

    #[test]
    fn a_wgmma_form_falling_back_runs_without_ranges() {
        // f16 under QSA_ATTN_KV_MMA=wg2a takes the tf32 kernel whole (wg 0): no ranges, no error.
        let tf32 = KvProducts {
            bf16: false,
            split: false,
            ..KvProducts::KV16S
        };
        assert_eq!(qchunk("1024", tf32, 16384), Ok(None));
    }
}

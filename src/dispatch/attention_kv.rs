//! The KV-block-major backward's products (`KvProducts`, `kv_products`) and the split fused
//! kernel's sweep forms (`kv_bwd`'s OPT bits, KV_OPT_* in
//! kernels/common/attention_kv_bwd.h; instantiated by selection_attention.cu's
//! QSA_ATTN_KV_DQ_FORM): two switches beside `QSA_ATTN_KV_MMA` / `QSA_ATTN_KV_DP_PARTS`.
//!
//! - `QSA_ATTN_KV_PS_PARTS=1`: P and dS in one bf16 part in dK / dV / dQ (fla's precision: fla
//!   casts P and dS to bf16 once). A measurement form: it tells how much of the gap to fla is
//!   the second part, and its error against FP64 beside fla's. The emulated error suite fails it
//!   on dq / dk (dS's 8 significant bits, ~2^-9 relative, against the 5e-5 gate): it is not a
//!   default candidate at the gate as it stands.
//! - `QSA_ATTN_KV_LAYOUT=nc`: no shared-memory bank conflicts in the tile's stores (P / dP rows
//!   at 76 floats, dO's split by contiguous quarter warps). Call P's Nsight profile of the
//!   default kernel: L1 / shared 73% busy (the top unit), shared stores 3-way conflicted on
//!   average (47.7% of store wavefronts), loads 15% excess wavefronts. Same arithmetic as the
//!   default, so the same results bit for bit.
//!
//! - `QSA_ATTN_KV_DP_PARTS=2` with the split kernel (bf16s or the default path): dO in two bf16
//!   parts (hi, mid) for dP = dO V^T (kv16sp2). dP's reads of dO's three parts are the largest
//!   term of a tile's shared wavefronts by H200.md's count (a prediction), and the dP warps run
//!   3x the S warps' mma between the same barriers; the third part holds dO's bits 17-24 only
//!   (~2^-17 relative). A default candidate: the emulated error suite passes it at the 5e-5 gate.
//!
//! - `QSA_ATTN_KV_MMA=wg`: the wgmma form (`qsa_attn_kvwg_dq_bwd_bf16`,
//!   kernels/common/attention_kv_wg.h): one warpgroup per (batch, KV head, block), 64-row tiles
//!   (`wg_geometry`), every product a 64-row wgmma; dO in two bf16 parts, P / dS in two. Fused
//!   only, sm_90a only (`Feature::Wgmma`): elsewhere a dispatch error names what it needs; f16
//!   inputs keep the tf32 kernel whole, as the other forms. A default candidate once the H200
//!   times it (H200.md); single-buffered as it stands.
//!
//! Built (fused only, bf16 on sm_90+): kv16sp1 (PS_PARTS=1), kv16sc (nc), kv16sp2 (DP_PARTS=2). Not built, as they
//! spilled at the 128-register bound (ptxas 13.0, sm_90, 2026-12-02): nc with
//! `QSA_ATTN_KV_DP_PARTS=2` (16 bytes) and nc with PS_PARTS=1 (8 bytes); kv16sp1 itself spills
//! 8 bytes (a measurement form: its resource row is reviewed, not a default candidate).

use crate::backend::BackendError;
use crate::dispatch::attention::{kv16_applies, BwdShape, BLOCK};
use crate::dispatch::{Feature, Switches, TargetCaps};
use crate::problem::AttnDtype;

/// The KV-block-major kernel's products (`kv_bwd`'s B16, SPLIT and dp_parts in
/// kernels/common/attention_kv_bwd.h), from the sweep switches (and the forms above):
/// - `QSA_ATTN_KV_MMA`: `tf32` (dK / dV / dQ as 3xTF32 m16n8k8, `qsa_attn_kv_*`), `bf16`
///   (bf16 m16n8k16 with P, dS and dO split into bf16 hi + lo, `qsa_attn_kv16_*`: half the
///   mma instructions, ~2^-16 relative per product; common/attention_kv_bwd16.h) or `bf16s`
///   (bf16, and each tile's dO split once into bf16 parts in shared memory instead of in
///   every warp that reads it, `qsa_attn_kv16s_*`, always 3 parts). f16 inputs are not exact in
///   one bf16 part, so they keep tf32 (the kv16 kernels exist for bf16 only), and so do targets
///   before sm_90 (built for sm_90+ only).
/// - `QSA_ATTN_KV_DP_PARTS`: 3 (dO in three 16-bit parts for dP = dO V^T, 2^-27 relative) or
///   2 (~2^-17; a third fewer dP mmas).
///
/// Defaults: bf16s on the default path, tf32 where `QSA_ATTN_BWD` is forced; dO in 3 parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvProducts {
    pub bf16: bool,
    /// dO split once per tile in shared memory (with bf16).
    pub split: bool,
    pub dp_parts: u32,
    /// P and dS's bf16 parts in dK / dV / dQ (2: hi + lo; 1: fla's precision, a measurement
    /// form, `QSA_ATTN_KV_PS_PARTS`); the split fused kernel's forms only (attention_kv.rs).
    pub ps_parts: u32,
    /// The conflict-free shared layout (`QSA_ATTN_KV_LAYOUT=nc`): the split fused kernel's forms.
    pub nc: bool,
    /// The wgmma form's row buffers: 0 (not the form), 1 (`QSA_ATTN_KV_MMA=wg`,
    /// `qsa_attn_kvwg_dq_bwd_bf16`) or 2 (`wgp`, `qsa_attn_kvwgp_dq_bwd_bf16`: the next tile's
    /// rows copied during this one). 64-row tiles (`wg_geometry`), one warpgroup per CTA
    /// (`KV_WG_THREADS`), `kv_wg_shared(stages)` bytes; 3 (`wg2`, `qsa_attn_kvwg2_dq_bwd_bf16`):
    /// one buffer, two warpgroups per CTA taking alternate tiles (`kv_wg_threads`); 4 (`wg2a`,
    /// `qsa_attn_kvwg2a_dq_bwd_bf16`): wg2 with dO landing chunk-major (a conflict-free split).
    pub wg: u32,
}

/// Threads of a `qsa_attn_kvwg_dq_bwd_bf16` CTA (KWG_THREADS): one warpgroup.
pub const KV_WG_THREADS: u32 = 128;
/// Dynamic shared bytes of the wgmma form with `stages` row buffers (`kwg_smem` in
/// kernels/common/attention_kv_wg.h): K, V, K^T, dO hi, dO lo (five 64 x 128 bf16 tiles), then
/// per buffer q (64 x 128 bf16), dO's f32 landing (64 x 128, reused for P^T / dS^T hi / lo) and
/// lse / D / position per row, then the chunk's 128 tokens and 4 per-warp counts: 132,368 and
/// 182,288 bytes.
/// `wg2` (stages 3): K, V, K^T, then each warpgroup's dO hi / lo and one buffer, then 256
/// tokens and 8 counts: 215,584 bytes; `wg2a` (stages 4) the same, then each warpgroup's two
/// tables of 64 tile rows (ints; `kwg_fill_rows`): 216,608 bytes.
pub fn kv_wg_shared(stages: u32) -> usize {
    let buffer = 64 * 128 * 2 + 64 * 128 * 4 + 3 * 64 * 4;
    if stages >= 3 {
        let per_wg = 2 * 64 * 128 * 2 + buffer;
        let row_tables = if stages == 4 { 2 * 2 * 64 * 4 } else { 0 };
        return 3 * 64 * 128 * 2 + 2 * per_wg + 256 * 4 + 8 * 4 + row_tables;
    }
    5 * 64 * 128 * 2 + stages as usize * buffer + 128 * 4 + 4 * 4
}

/// Threads of a wgmma-form CTA: two warpgroups for `wg2` / `wg2a` (stages 3 / 4), else one.
pub fn kv_wg_threads(stages: u32) -> u32 {
    if stages >= 3 {
        2 * KV_WG_THREADS
    } else {
        KV_WG_THREADS
    }
}

/// The wgmma form's tile: `hc` heads (the staged plan's: the largest divisor of the group up
/// to 16) x `64 / hc` tokens, 64 rows at most (group 16: 4 tokens; 32: two tiles per token;
/// 4 / 8: 16 / 8 tokens).
pub fn wg_geometry(hc: usize) -> (usize, usize) {
    (hc, 64 / hc)
}

impl KvProducts {
    /// The default path's products: bf16, dO split once per tile in three parts.
    pub const KV16S: KvProducts = KvProducts {
        bf16: true,
        split: true,
        dp_parts: 3,
        ps_parts: 2,
        nc: false,
        wg: 0,
    };

    /// The kernels' name stem: `qsa_attn_{stem}_bwd_*`, `qsa_attn_{stem}_dq_bwd_*` (the split
    /// kernel's sweep forms exist fused only: `kv_products` refuses them unfused and refuses the
    /// combinations not built, so the last arm names no kernel a checked switch set reaches).
    pub fn stem(self) -> &'static str {
        match self.wg {
            0 => {}
            1 => return "kvwg",
            3 => return "kvwg2",
            4 if self.dp_parts == 3 => return "kvwg2a3",
            4 if self.dp_parts == 1 => return "kvwg2ab", // bf16 dO (dispatch/attention_do.rs)
            4 => return "kvwg2a",
            _ => return "kvwgp",
        }
        match (self.bf16, self.split, self.nc, self.dp_parts, self.ps_parts) {
            (false, ..) => "kv",
            (true, false, ..) => "kv16",
            (true, true, false, 3, 2) => "kv16s",
            (true, true, false, 3, 1) => "kv16sp1",
            (true, true, true, 3, 2) => "kv16sc",
            (true, true, false, 2, 2) => "kv16sp2",
            _ => "kv16s_unbuilt_form",
        }
    }

    /// One of the split kernel's sweep forms (KV_OPT_* in kernels/common/attention_kv_bwd.h).
    pub fn is_form(self) -> bool {
        self.split && (self.nc || self.ps_parts != 2 || self.dp_parts != 3)
    }
}

pub fn kv_products(
    caps: &TargetCaps,
    sw: &Switches,
    dtype: AttnDtype,
    shape: BwdShape,
) -> Result<KvProducts, BackendError> {
    // Unset: bf16s on the default path (QSA_ATTN_BWD unset: choose_backward's default), tf32
    // where QSA_ATTN_BWD forces a path (the kv_bwd / kvdq_bwd variants keep measuring tf32).
    let default_path = sw.get("QSA_ATTN_BWD").is_none();
    let forms_set = [
        "QSA_ATTN_KV_DP_PARTS",
        "QSA_ATTN_KV_PS_PARTS",
        "QSA_ATTN_KV_LAYOUT",
    ]
    .iter()
    .any(|k| sw.get(k).is_some());
    let (bf16, split) = match sw.get("QSA_ATTN_KV_MMA") {
        None if default_path
            && !forms_set
            && default_wg(caps, dtype, KV_WG_DEFAULT) > 0
            && wg_pays(shape) =>
        {
            return wg_products(caps, sw, dtype, KV_WG_DEFAULT, KV_WG_DEFAULT_DP_PARTS);
        }
        None if default_path => (true, true),
        None | Some("tf32") => (false, false),
        Some("bf16") => (true, false),
        Some("bf16s") => (true, true),
        Some("wg") => return wg_products(caps, sw, dtype, 1, 2),
        Some("wgp") => return wg_products(caps, sw, dtype, 2, 2),
        Some("wg2") => return wg_products(caps, sw, dtype, 3, 2),
        Some("wg2a") => return wg_products(caps, sw, dtype, 4, 2),
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_KV_MMA={}: expected tf32, bf16, bf16s, wg, wgp, wg2 or wg2a",
                crate::echo::value(v)
            )))
        }
    };
    let dp_parts = dp_parts_switch(sw)?.unwrap_or(3);
    let (ps_parts, nc) = kv_forms(sw, split)?;
    // The split kernel's two-part dO is a form (kv16sp2), built fused only, as the others.
    if dp_parts != 3 && split && sw.get("QSA_ATTN_BWD") == Some("kv") {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_KV_DP_PARTS={dp_parts} with QSA_ATTN_KV_MMA=bf16s: the split kernel's \
             two-part form is built fused only (QSA_ATTN_BWD=kvdq or unset), not for \
             QSA_ATTN_BWD=kv (use bf16 there)"
        )));
    }
    if dp_parts != 3 && !bf16 {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_KV_DP_PARTS={dp_parts} needs QSA_ATTN_KV_MMA=bf16 (the tf32 kernels split \
             dO in 3 parts)"
        )));
    }
    // f16 inputs, and targets before sm_90 (the kv16 kernels are built for sm_90+ only:
    // sm_86's build spilled; Feature::Clusters marks sm_90+, as for the ring's swizzled
    // kernel), fall back to the tf32 kernel whole (3 parts), as a forced kv falls back where
    // its kernel is not built.
    let bf16 = bf16 && kv16_applies(caps, dtype);
    let kv = KvProducts {
        bf16,
        split: split && bf16,
        dp_parts: if bf16 { dp_parts } else { 3 },
        ps_parts: if bf16 { ps_parts } else { 2 },
        nc: nc && bf16,
        wg: 0,
    };
    check_form(kv)?;
    Ok(kv)
}

/// The wgmma form the default path takes: 0 (none: the split kernel
/// `qsa_attn_kv16s_dq_bwd_bf16`), 1 (`wg`), 2 (`wgp`), 3 (`wg2`) or 4 (`wg2a`), with dO in
/// `KV_WG_DEFAULT_DP_PARTS` parts, on shapes where `wg_pays`. It flips only from the H200's
/// figures: >= 3% faster than the default in the prefill bench, every error unit and sanitizer
/// clean, and the golden run's gates holding.
/// - Session 13 (H200, 2026-12-03) flipped it to wg2a (two dO parts) on call A's figures
///   (`bench/attn_bwd_forms.py`, B=4, T=16K, 64 / 4 heads: 65.29 ms against kv16s 69.08 /
///   69.35) and call G's golden run refused it: dk 8.9e-5 on attn_prefill_16k (limit 5e-5: the
///   two-part dO split) and attn_decode_16q_8k's backward 160.3 us against 85.8 (1.87x).
/// - Session 14 call A (2026-12-03, docs/results/session14-2026-12-03/): wg2a with three dO
///   parts (`kvwg2a3`) passes attn_kvf_prefill_16k (dk 2.7e-5, dq 1.1e-5), every forms case and
///   the three sanitizers, and times 66.13 ms against kv16s 69.32 / 70.61 (-4.6%; fla 55.12);
///   `wg_pays` keeps it off the short grids.
pub const KV_WG_DEFAULT: u32 = 4;
/// dO's bf16 parts for dP in the default's wgmma form: three, as kv16s (two failed dk's gate
/// at T=16K, session 13 call E).
pub const KV_WG_DEFAULT_DP_PARTS: u32 = 3;
/// The default takes the wgmma form where each KV block is selected by at least this many
/// tokens on average (`q_len * t / ceil(kv_len / 64)`, per batch and KV head): its 64-row tiles
/// and one 215 KB CTA per SM lose on short lists. Session 14 call A (H200, the
/// attn_kvf_rows_* cases of examples/cases/attn-kv16-forms.yaml: 128 / 8 heads, kv_len 8192,
/// backward medians): 2 per block, kvwg2a3 169.1 us against kv16s 88.7 (1.91x); 16, 397.9
/// against 368.2 (1.08x); 128, 2,197.7 against 2,433.4 (0.90x); 1,024, 15,639 against 16,730
/// (0.93x). The line sits between 16 and 128 (group 16 measured; 4 and 8 not).
pub const KV_WG_MIN_SELECTIONS: usize = 64;

/// Whether the wgmma form pays on this shape (`KV_WG_MIN_SELECTIONS`).
pub(crate) fn wg_pays(shape: BwdShape) -> bool {
    shape.q_len * shape.t >= KV_WG_MIN_SELECTIONS * shape.kv_len.div_ceil(BLOCK)
}

/// `stages` where the default path may take the wgmma form (bf16 inputs, wgmma, its shared
/// memory fits), else 0: sm_90 through its PTX, f16 and every other target keep the split
/// kernel, never an error.
pub(crate) fn default_wg(caps: &TargetCaps, dtype: AttnDtype, stages: u32) -> u32 {
    let fits = kv_wg_shared(stages) <= caps.shared_per_block as usize;
    if stages > 0 && caps.has(Feature::Wgmma) && dtype == AttnDtype::Bf16 && fits {
        stages
    } else {
        0
    }
}

/// `QSA_ATTN_KV_MMA=wg` / `wgp` (`stages` 1 / 2): the wgmma form where it is built (bf16 on
/// sm_90a, fused), the tf32 kernel whole for f16 inputs (as every bf16 form), a clear error
/// elsewhere.
fn wg_products(
    caps: &TargetCaps,
    sw: &Switches,
    dtype: AttnDtype,
    stages: u32,
    unset_dp_parts: u32,
) -> Result<KvProducts, BackendError> {
    for key in ["QSA_ATTN_KV_PS_PARTS", "QSA_ATTN_KV_LAYOUT"] {
        if let Some(v) = sw.get(key) {
            return Err(BackendError::Input(format!(
                "{key}={} with QSA_ATTN_KV_MMA=wg / wgp / wg2 / wg2a: the wgmma form has no such \
                 variant (P / dS in two bf16 parts)",
                crate::echo::value(v)
            )));
        }
    }
    let dp_parts = wg_dp_parts(sw, stages, unset_dp_parts)?;
    if sw.get("QSA_ATTN_BWD") == Some("kv") {
        return Err(BackendError::Input(
            "QSA_ATTN_KV_MMA=wg / wgp: the wgmma form is built fused only (QSA_ATTN_BWD=kvdq or \
             unset), not for QSA_ATTN_BWD=kv"
                .into(),
        ));
    }
    if dtype != AttnDtype::Bf16 {
        let tf32 = KvProducts {
            bf16: false,
            split: false,
            ..KvProducts::KV16S
        };
        return Ok(tf32);
    }
    let kv = KvProducts {
        dp_parts,
        wg: stages,
        ..KvProducts::KV16S
    };
    let shared = kv_wg_shared(stages);
    if !caps.has(Feature::Wgmma) || shared > caps.shared_per_block as usize {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_KV_MMA={}: qsa_attn_{}_dq_bwd_bf16 needs wgmma (sm_90a, run natively, not \
             through PTX) and {shared} bytes of shared memory per block; this target has \
             wgmma: {}, {} bytes",
            ["", "wg", "wgp", "wg2", "wg2a"][stages as usize],
            kv.stem(),
            caps.has(Feature::Wgmma),
            caps.shared_per_block
        )));
    }
    Ok(kv)
}

/// dO's bf16 parts for dP in the wgmma form: 2, or 3 (`QSA_ATTN_KV_DP_PARTS=3`) with wg2a
/// only (`qsa_attn_kvwg2a3_dq_bwd_bf16`: its third part lies over wg2a's chunk-major landing;
/// kernels/common/attention_kv_wg.h, kwg_split). Two parts failed dk's 5e-5 gate at T=16K on
/// the H200 (1.36e-4, session 13 call E), three are kv16s's.
/// `unset`: the parts when the switch is not set (2 for a forced form, the default's own).
fn wg_dp_parts(sw: &Switches, stages: u32, unset: u32) -> Result<u32, BackendError> {
    match (dp_parts_switch(sw)?, stages) {
        (None, _) => Ok(unset),
        (Some(3), stages) if stages != 4 => Err(BackendError::Input(format!(
            "QSA_ATTN_KV_DP_PARTS=3 with QSA_ATTN_KV_MMA={}: only wg2a has a three-part dO form \
             (qsa_attn_kvwg2a3_dq_bwd_bf16); use QSA_ATTN_KV_MMA=wg2a, or leave \
             QSA_ATTN_KV_DP_PARTS unset",
            ["", "wg", "wgp", "wg2", "wg2a"][stages as usize]
        ))),
        (Some(parts), _) => Ok(parts),
    }
}

/// `QSA_ATTN_KV_DP_PARTS` (dO's bf16 parts for dP): None when unset, else 2 or 3; any other
/// value is an input error naming the two. One parser for the split kernels' and the wgmma
/// forms' readings, so the two cannot accept different spellings.
fn dp_parts_switch(sw: &Switches) -> Result<Option<u32>, BackendError> {
    match sw.get("QSA_ATTN_KV_DP_PARTS") {
        None => Ok(None),
        Some("2") => Ok(Some(2)),
        Some("3") => Ok(Some(3)),
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_KV_DP_PARTS={}: expected 2 or 3",
            crate::echo::value(v)
        ))),
    }
}

/// `(ps_parts, nc)` from the switches; `split`: the split kernel is requested (bf16s, or the
/// default path). Either form needs it.
pub(crate) fn kv_forms(sw: &Switches, split: bool) -> Result<(u32, bool), BackendError> {
    let ps_parts = match sw.get("QSA_ATTN_KV_PS_PARTS") {
        None | Some("2") => 2,
        Some("1") => 1,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_KV_PS_PARTS={}: expected 1 or 2",
                crate::echo::value(v)
            )))
        }
    };
    let nc = match sw.get("QSA_ATTN_KV_LAYOUT") {
        None | Some("base") => false,
        Some("nc") => true,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_KV_LAYOUT={}: expected base or nc",
                crate::echo::value(v)
            )))
        }
    };
    if (ps_parts != 2 || nc) && !split {
        return Err(BackendError::Input(
            "QSA_ATTN_KV_PS_PARTS / QSA_ATTN_KV_LAYOUT: forms of the split kernel only \
             (QSA_ATTN_KV_MMA=bf16s, the default path's)"
                .into(),
        ));
    }
    if (ps_parts != 2 || nc) && sw.get("QSA_ATTN_BWD") == Some("kv") {
        return Err(BackendError::Input(
            "QSA_ATTN_KV_PS_PARTS / QSA_ATTN_KV_LAYOUT: the forms are built fused only \
             (QSA_ATTN_BWD=kvdq or unset), not for QSA_ATTN_BWD=kv"
                .into(),
        ));
    }
    Ok((ps_parts, nc))
}

/// A form whose kernel is not built is refused here, naming the built ones (so `stem` only
/// ever names a kernel that exists).
pub(crate) fn check_form(kv: KvProducts) -> Result<(), BackendError> {
    if kv.is_form() && kv.stem() == "kv16s_unbuilt_form" {
        return Err(BackendError::Input(format!(
            "the split kernel's form QSA_ATTN_KV_PS_PARTS={} QSA_ATTN_KV_LAYOUT={} \
             QSA_ATTN_KV_DP_PARTS={} is not built; built: PS_PARTS=1 (kv16sp1), LAYOUT=nc \
             (kv16sc), DP_PARTS=2 (kv16sp2)",
            kv.ps_parts,
            if kv.nc { "nc" } else { "base" },
            kv.dp_parts
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::dispatch::attention::{kv_products, BwdShape};
    use crate::dispatch::{Feature, Switches};
    use crate::problem::AttnDtype;

    /// The issue-13 prefill shape (1,024 selections per KV block: the wgmma default pays).
    const PREFILL: BwdShape = BwdShape {
        q_len: 16384,
        kv_len: 16384,
        t: 16,
    };
    /// attn_decode_16q_8k's (two selections per block: the split kernel stays).
    const SHORT: BwdShape = BwdShape {
        q_len: 16,
        kv_len: 8192,
        t: 16,
    };

    fn products(kv: &[(&str, &str)], dtype: AttnDtype) -> Result<&'static str, String> {
        let mut h200 = crate::dispatch::attention::tests::caps("sm_90", 227, 132);
        h200.features = vec![Feature::Bf16Tc, Feature::Clusters];
        kv_products(&h200, &Switches::from_pairs(kv), dtype, PREFILL)
            .map(|p| p.stem())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn each_form_names_its_kernel_and_the_rest_are_refused() {
        let bf16 = AttnDtype::Bf16;
        assert_eq!(
            products(&[], bf16).unwrap(),
            "kv16s",
            "the default is untouched"
        );
        let p1 = [("QSA_ATTN_KV_PS_PARTS", "1")];
        assert_eq!(products(&p1, bf16).unwrap(), "kv16sp1");
        let nc = [("QSA_ATTN_KV_LAYOUT", "nc")];
        assert_eq!(products(&nc, bf16).unwrap(), "kv16sc");
        let forced = [("QSA_ATTN_BWD", "kvdq"), ("QSA_ATTN_KV_MMA", "bf16s")];
        let forced_nc = [forced[0], forced[1], nc[0]];
        assert_eq!(products(&forced_nc, bf16).unwrap(), "kv16sc");
        assert_eq!(
            products(&nc, AttnDtype::F16).unwrap(),
            "kv",
            "f16 inputs keep the tf32 kernel whole"
        );
        let refused = |kv: &[(&str, &str)], want: &str| {
            let e = products(kv, bf16).unwrap_err();
            assert!(e.contains(want), "{e}");
        };
        refused(
            &[("QSA_ATTN_KV_LAYOUT", "nc"), ("QSA_ATTN_KV_PS_PARTS", "1")],
            "is not built; built: PS_PARTS=1 (kv16sp1)",
        );
        let dp2 = [("QSA_ATTN_KV_DP_PARTS", "2")];
        assert_eq!(products(&dp2, bf16).unwrap(), "kv16sp2");
        // The kernel reads dO's parts by its dp_parts argument (attention_kv_bwd.h, KV_OPT_DO2)
        // and its split writes two: the plan must pass 2 (plan.rs pushes kv.dp_parts).
        let mut h200 = crate::dispatch::attention::tests::caps("sm_90", 227, 132);
        h200.features = vec![Feature::Bf16Tc, Feature::Clusters];
        let kv = kv_products(&h200, &Switches::from_pairs(&dp2), bf16, PREFILL).unwrap();
        assert_eq!(
            (kv.split, kv.dp_parts, kv.ps_parts, kv.nc),
            (true, 2, 2, false)
        );
        let forced_dp2 = [forced[0], forced[1], dp2[0]];
        assert_eq!(products(&forced_dp2, bf16).unwrap(), "kv16sp2");
        assert_eq!(
            products(&dp2, AttnDtype::F16).unwrap(),
            "kv",
            "f16 inputs keep the tf32 kernel whole"
        );
        refused(
            &[("QSA_ATTN_KV_PS_PARTS", "1"), dp2[0]],
            "is not built; built: PS_PARTS=1 (kv16sp1), LAYOUT=nc (kv16sc), DP_PARTS=2 (kv16sp2)",
        );
        refused(&[("QSA_ATTN_KV_LAYOUT", "nc"), dp2[0]], "is not built");
        refused(
            &[("QSA_ATTN_BWD", "kv"), ("QSA_ATTN_KV_MMA", "bf16s"), dp2[0]],
            "built fused only",
        );
        refused(
            &[("QSA_ATTN_KV_MMA", "bf16"), ("QSA_ATTN_KV_LAYOUT", "nc")],
            "forms of the split kernel only",
        );
        refused(
            &[("QSA_ATTN_BWD", "kv"), ("QSA_ATTN_KV_MMA", "bf16s"), nc[0]],
            "built fused only",
        );
        refused(&[("QSA_ATTN_KV_PS_PARTS", "3")], "expected 1 or 2");
        refused(&[("QSA_ATTN_KV_LAYOUT", "swz")], "expected base or nc");
    }

    /// The wgmma form: named where wgmma exists (its stem, its tiles and shared bytes as the
    /// kernel's), the tf32 kernel for f16, and a message naming what is missing elsewhere.
    #[test]
    fn the_wgmma_form_runs_on_sm90a_only() {
        use crate::dispatch::attention::{kv_bwd_shared_bytes, kv_wg_shared, wg_geometry};
        let mut h200 = crate::dispatch::attention::tests::caps("sm_90", 227, 132);
        h200.features = vec![Feature::Bf16Tc, Feature::Clusters, Feature::Wgmma];
        let get_at = |caps: &crate::dispatch::TargetCaps, kv: &[(&str, &str)], dtype, shape| {
            kv_products(caps, &Switches::from_pairs(kv), dtype, shape).map_err(|e| e.to_string())
        };
        let get = |caps: &crate::dispatch::TargetCaps, kv: &[(&str, &str)], dtype| {
            get_at(caps, kv, dtype, PREFILL)
        };
        let bf16 = AttnDtype::Bf16;
        for (mma, stem, stages, bytes) in [
            ("wg", "kvwg", 1, 132_368),
            ("wgp", "kvwgp", 2, 182_288),
            ("wg2", "kvwg2", 3, 215_584),
            ("wg2a", "kvwg2a", 4, 216_608),
        ] {
            let sw = [("QSA_ATTN_KV_MMA", mma)];
            let kv = get(&h200, &sw, bf16).unwrap();
            assert_eq!((kv.stem(), kv.wg), (stem, stages));
            // kernels/selection_attention.cu's qsa:dynamic_shared for the kernel.
            assert_eq!(kv_bwd_shared_bytes(kv, true), bytes);
            assert_eq!(kv_wg_shared(stages), bytes);
            let forced = [("QSA_ATTN_BWD", "kvdq"), sw[0]];
            assert_eq!(get(&h200, &forced, bf16).unwrap().stem(), stem);
            assert_eq!(get(&h200, &sw, AttnDtype::F16).unwrap().stem(), "kv");
            let unfused = [("QSA_ATTN_BWD", "kv"), sw[0]];
            assert!(get(&h200, &unfused, bf16)
                .unwrap_err()
                .contains("built fused only"));
            let dp2 = [sw[0], ("QSA_ATTN_KV_DP_PARTS", "2")];
            assert_eq!(
                get(&h200, &dp2, bf16).unwrap().stem(),
                stem,
                "two parts: the form"
            );
            let p1 = [sw[0], ("QSA_ATTN_KV_PS_PARTS", "1")];
            assert!(get(&h200, &p1, bf16)
                .unwrap_err()
                .contains("has no such variant"));
            // Three dO parts: wg2a's third lies over its chunk-major landing; the others refuse.
            let dp3 = [sw[0], ("QSA_ATTN_KV_DP_PARTS", "3")];
            match get(&h200, &dp3, bf16) {
                Ok(kv) => {
                    assert_eq!(mma, "wg2a", "a three-part dO form other than wg2a's");
                    assert_eq!((kv.stem(), kv.dp_parts, kv.wg), ("kvwg2a3", 3, 4));
                    assert_eq!(
                        kv_bwd_shared_bytes(kv, true),
                        bytes,
                        "no more shared memory"
                    );
                    let ptx_err = {
                        let mut ptx = h200.clone();
                        ptx.features.retain(|f| *f != Feature::Wgmma);
                        get(&ptx, &dp3, bf16).unwrap_err()
                    };
                    assert!(ptx_err.contains("kvwg2a3"), "{ptx_err}");
                }
                Err(e) => assert!(
                    mma != "wg2a" && e.contains("only wg2a has a three-part dO form"),
                    "{mma}: {e}"
                ),
            }
            let dp4 = [sw[0], ("QSA_ATTN_KV_DP_PARTS", "4")];
            assert!(get(&h200, &dp4, bf16)
                .unwrap_err()
                .contains("expected 2 or 3"));
            // sm_90 through its PTX (no arch-specific wgmma) and sm_86: a clear error.
            let mut ptx = h200.clone();
            ptx.features.retain(|f| *f != Feature::Wgmma);
            let e = get(&ptx, &sw, bf16).expect_err(
                "the wgmma form dispatched where wgmma is absent (sm_90 through PTX): that module \
                 has no qsa_attn_kvwg* kernel",
            );
            assert!(e.contains("needs wgmma") && e.contains(stem), "{e}");
        }
        // The default's flip (KV_WG_DEFAULT): taken with wgmma and bf16 only, else the split
        // kernel (sm_90 through PTX, f16), whichever value the constant holds.
        use super::default_wg;
        let mut ptx = h200.clone();
        ptx.features.retain(|f| *f != Feature::Wgmma);
        for stages in [1, 2, 3, 4] {
            assert_eq!(default_wg(&h200, bf16, stages), stages);
            assert_eq!(
                default_wg(&ptx, bf16, stages),
                0,
                "a default wgmma form on a target without wgmma (sm_90 through PTX)"
            );
            assert_eq!(default_wg(&h200, AttnDtype::F16, stages), 0);
        }
        assert_eq!(default_wg(&h200, bf16, 0), 0);
        // The measured default (KV_WG_DEFAULT's comment): wg2a with three dO parts where each
        // block is selected by >= 64 tokens, the split kernel below (1.91x faster at 2 per
        // block); another form or line needs its own measurement.
        let default = get(&h200, &[], bf16).unwrap();
        assert_eq!(
            (default.stem(), default.dp_parts),
            ("kvwg2a3", 3),
            "the H200's bf16 prefill backward default is not the measured one (kvwg2a3: session \
             14 call A; two dO parts failed dk's gate at T=16K in session 13)"
        );
        assert_eq!(
            get_at(&h200, &[], bf16, SHORT).unwrap().stem(),
            "kv16s",
            "the wgmma default on a short grid (attn_decode_16q_8k: 1.91x slower, session 14 call A)"
        );
        use super::{wg_pays, KV_WG_MIN_SELECTIONS};
        let line = |q_len| BwdShape {
            q_len,
            kv_len: 8192,
            t: 16,
        };
        // 128 blocks: 64 selections per block at q_len 512.
        assert!(wg_pays(line(512)) && !wg_pays(line(511)));
        assert_eq!(KV_WG_MIN_SELECTIONS, 64);
        assert_eq!(get(&ptx, &[], bf16).unwrap().stem(), "kv16s");
        assert_eq!(
            get(&h200, &[], AttnDtype::F16).unwrap().stem(),
            "kv",
            "f16 has no wgmma form"
        );
        let forced_wg2a = [("QSA_ATTN_KV_MMA", "wg2a")];
        assert_eq!(
            get(&h200, &forced_wg2a, bf16).unwrap().stem(),
            "kvwg2a",
            "a forced wg2a keeps two dO parts (its measured form)"
        );
        let dp2 = [("QSA_ATTN_KV_DP_PARTS", "2")];
        assert_eq!(get(&h200, &dp2, bf16).unwrap().stem(), "kv16sp2");
        // 64-row tiles: group 16 -> 4 tokens, 32 -> 16 heads (two tiles per token), 4 -> 16.
        assert_eq!(wg_geometry(16), (16, 4));
        assert_eq!(wg_geometry(4), (4, 16));
        assert_eq!(wg_geometry(1), (1, 64));
    }
}

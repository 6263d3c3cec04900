//! How the backward reads an upstream gradient dO given as bf16 (`do_dtype=bf16`, src/problem.rs
//! GradDtype): the one rule the dispatch snapshot (src/plan.rs) and the launch plan
//! (src/gpu/attention/plan.rs) both call.
//!
//! - `Native`: the fused wgmma backward of the wg2a family (kvwg2a / kvwg2a3) becomes
//!   `qsa_attn_kvwg2ab_dq_bwd_bf16`: dO copied as bf16 straight into wgmma's operand, exact in
//!   one part, so dP^T is one product (f32 dO takes three: kvwg2a3) and dV^T two; D = rowsum(dO O)
//!   by `qsa_attn_bwd_delta_do16`.
//! - `Widen`: every other backward reads f32 rows, so `qsa_attn_do_widen` writes dO as f32 into
//!   a workspace first (exact) and the path runs as with f32 dO; its dispatch name says so
//!   (`+widen_do`).
//! - `F32`: dO given as f32, as before.

use super::attention::BwdPath;
use super::attention_kv::KvProducts;
use crate::problem::GradDtype;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoRead {
    F32,
    Native,
    Widen,
}

impl DoRead {
    /// What the dispatch name gains: the widening step is a launch of its own.
    pub fn suffix(self) -> &'static str {
        match self {
            DoRead::Widen => "+widen_do",
            _ => "",
        }
    }
}

/// The backward's products with dO read as `do_dtype` says, and how it is read. `path` /
/// `products`: the staged backward's choice (None for the gather backward).
pub fn resolve_do(
    do_dtype: GradDtype,
    path: Option<BwdPath>,
    products: Option<KvProducts>,
) -> (Option<KvProducts>, DoRead) {
    match (do_dtype, path, products) {
        (GradDtype::F32, ..) => (products, DoRead::F32),
        (GradDtype::Bf16, Some(BwdPath::KvFused), Some(kv)) if kv.wg == 4 => {
            (Some(KvProducts { dp_parts: 1, ..kv }), DoRead::Native)
        }
        (GradDtype::Bf16, ..) => (products, DoRead::Widen),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wg2a3() -> KvProducts {
        KvProducts {
            wg: 4,
            ..KvProducts::KV16S
        }
    }

    #[test]
    fn bf16_do_is_native_on_the_fused_wg2a_forms_only() {
        let (kv, read) = resolve_do(GradDtype::Bf16, Some(BwdPath::KvFused), Some(wg2a3()));
        assert_eq!((kv.unwrap().stem(), read), ("kvwg2ab", DoRead::Native));
        // The split kernel, the unfused pass, the gather backward: widened first.
        let (kv, read) = resolve_do(
            GradDtype::Bf16,
            Some(BwdPath::KvFused),
            Some(KvProducts::KV16S),
        );
        assert_eq!((kv.unwrap().stem(), read), ("kv16s", DoRead::Widen));
        let (_, read) = resolve_do(GradDtype::Bf16, Some(BwdPath::KvMajor), Some(wg2a3()));
        assert_eq!(read, DoRead::Widen);
        assert_eq!(
            resolve_do(GradDtype::Bf16, None, None).1.suffix(),
            "+widen_do"
        );
        // f32 dO: untouched.
        let (kv, read) = resolve_do(GradDtype::F32, Some(BwdPath::KvFused), Some(wg2a3()));
        assert_eq!((kv.unwrap().stem(), read), ("kvwg2a3", DoRead::F32));
    }
}

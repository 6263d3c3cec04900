//! QSA_ATTN_DEC_CTAMERGE's dispatch: the chain merge (`chain`, the `_ch_` kernels) on the 16-query
//! shape, the running partial's bytes, where it is refused (no sm_90a code, split items, the
//! forms it has no kernel for), and the default (the pull merge) pinned until the card measures
//! the chain faster.
use super::*;

/// The H200 with sm_90a's code object (named barriers) and clusters.
fn h200w() -> TargetCaps {
    let mut c = h200c();
    c.features.push(Feature::Wgmma);
    c
}

const CHAIN: (&str, &str) = ("QSA_ATTN_DEC_CTAMERGE", "chain");

#[test]
fn chain_merge_plans_refusals_and_default() {
    use Want::*;
    check(&[
        (
            // Flipping DEFAULT_CHAIN without the card's figure fails here.
            "16 queries, auto: the pull merge",
            h200w,
            &[],
            Q16,
            Plan(&[("chain", "false"), ("bf16 kernel", "qsa_attn_dec_fwd_bf16")]),
        ),
        (
            // 8 warps x 2 stages (139264) + the running partial (8320).
            "16 queries, chain",
            h200w,
            &[CHAIN],
            Q16,
            Plan(&[
                ("chain", "true"),
                ("nsplit", "1"),
                ("shared", "147584"),
                ("dispatch", "decode"),
                ("bf16 kernel", "qsa_attn_dec_ch_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_ch_fwd_f16"),
            ]),
        ),
        (
            "pull, said explicitly",
            h200w,
            &[("QSA_ATTN_DEC_CTAMERGE", "pull")],
            Q16,
            Plan(&[("chain", "false"), ("bf16 kernel", "qsa_attn_dec_fwd_bf16")]),
        ),
        (
            "chain through sm_90's portable PTX (no sm_90a code)",
            h200c,
            &[CHAIN],
            Q16,
            Refused("QSA_ATTN_DEC_CTAMERGE=chain needs sm_90a's named barriers"),
        ),
        (
            "chain on sm_86",
            sm86,
            &[CHAIN],
            Q16,
            Refused("QSA_ATTN_DEC_CTAMERGE=chain needs sm_90a's named barriers"),
        ),
        (
            "chain at one query (8 splits as a cluster)",
            h200w,
            &[CHAIN],
            Q1,
            Refused("QSA_ATTN_DEC_CTAMERGE=chain has no kernel for 8 splits per item"),
        ),
        (
            "chain with pairs of units",
            h200w,
            &[CHAIN, ("QSA_ATTN_DEC_PAIR", "1")],
            Q16,
            Refused("QSA_ATTN_DEC_CTAMERGE=chain has no kernel for QSA_ATTN_DEC_PAIR=1"),
        ),
        (
            "chain with q per CTA",
            h200w,
            &[CHAIN, ("QSA_ATTN_DEC_QLOAD", "cta")],
            Q16,
            Refused("QSA_ATTN_DEC_CTAMERGE=chain has no kernel for QSA_ATTN_DEC_QLOAD=cta"),
        ),
        (
            "chain with O's dims split",
            h200w,
            &[CHAIN, ("QSA_ATTN_DEC_DIMS", "half")],
            Q16,
            Refused("QSA_ATTN_DEC_CTAMERGE=chain has no kernel for QSA_ATTN_DEC_DIMS=half"),
        ),
        (
            "a bad value",
            h200w,
            &[("QSA_ATTN_DEC_CTAMERGE", "tree")],
            Q16,
            Refused("QSA_ATTN_DEC_CTAMERGE=tree: expected pull or chain"),
        ),
    ]);
}

//! QSA_ATTN_DEC_DIMS's dispatch: O's head dimension split over warp pairs (`half`, the `_hd_`
//! kernels) on the two issue-13 shapes, where it is refused (the forms it has no kernel for), and
//! the default (`whole`) pinned until the card measures `half` faster.
use super::*;

const HALF: (&str, &str) = ("QSA_ATTN_DEC_DIMS", "half");

#[test]
fn dims_split_plans_refusals_and_default() {
    use Want::*;
    check(&[
        (
            // Flipping DEFAULT_HALF without the card's figure fails here.
            "16 queries, auto: whole dims",
            h200c,
            &[],
            Q16,
            Plan(&[
                ("half_dims", "false"),
                ("bf16 kernel", "qsa_attn_dec_fwd_bf16"),
            ]),
        ),
        (
            "one query, auto: whole dims (cluster pull merge, q per CTA)",
            h200c,
            &[],
            Q1,
            Plan(&[
                ("half_dims", "false"),
                ("bf16 kernel", "qsa_attn_dec_qs_cl_fwd_bf16"),
            ]),
        ),
        (
            // Same launch as auto's (8 warps x 2 stages, one CTA per item): only the kernel differs.
            "16 queries, half",
            h200c,
            &[HALF],
            Q16,
            Plan(&[
                ("half_dims", "true"),
                ("warps", "8"),
                ("stages", "2"),
                ("nsplit", "1"),
                ("shared", "139264"),
                ("dispatch", "decode"),
                ("bf16 kernel", "qsa_attn_dec_hd_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_hd_fwd_f16"),
            ]),
        ),
        (
            // 16 units per CTA over 4 pairs: a pair's 4 units take a 2-stage ring (auto's whole
            // dims cap it at one: one unit a warp).
            "one query, half: the cluster kernel with q per CTA",
            h200c,
            &[HALF],
            Q1,
            Plan(&[
                ("half_dims", "true"),
                ("merge", "Cluster"),
                ("q_cta", "true"),
                ("stages", "2"),
                ("dispatch", "decode_cluster"),
                ("bf16 kernel", "qsa_attn_dec_hd_qs_cl_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_hd_qs_cl_fwd_f16"),
            ]),
        ),
        (
            "sm_86 one query, half: the ticket merge, each warp loading q",
            sm86,
            &[HALF],
            Q1,
            Plan(&[
                ("half_dims", "true"),
                ("merge", "Kernel"),
                ("q_cta", "false"),
                ("bf16 kernel", "qsa_attn_dec_hd_fwd_bf16"),
            ]),
        ),
        (
            "whole, said explicitly",
            h200c,
            &[("QSA_ATTN_DEC_DIMS", "whole")],
            Q16,
            Plan(&[("half_dims", "false"), ("bf16 kernel", "qsa_attn_dec_fwd_bf16")]),
        ),
        (
            "half on an odd warp count",
            h200c,
            &[HALF, ("QSA_ATTN_DEC_WARPS", "3")],
            Q16,
            Refused("QSA_ATTN_DEC_DIMS=half has no kernel for QSA_ATTN_DEC_WARPS=3"),
        ),
        (
            "half with pairs of units",
            h200c,
            &[HALF, ("QSA_ATTN_DEC_PAIR", "1")],
            Q16,
            Refused("QSA_ATTN_DEC_DIMS=half has no kernel for QSA_ATTN_DEC_PAIR=1"),
        ),
        (
            "half with the dynamic order",
            h200c,
            &[HALF, ("QSA_ATTN_DEC_ORDER", "dynamic")],
            Q16,
            Refused("QSA_ATTN_DEC_DIMS=half has no kernel for QSA_ATTN_DEC_ORDER=dynamic"),
        ),
        (
            "half with the lean merge",
            h200c,
            &[HALF, ("QSA_ATTN_DEC_MERGE", "lean")],
            Q1,
            Refused("QSA_ATTN_DEC_DIMS=half has no kernel for the Lean merge"),
        ),
        (
            "half with the cluster merge and each warp loading q",
            h200c,
            &[HALF, ("QSA_ATTN_DEC_QLOAD", "warp")],
            Q1,
            Refused("QSA_ATTN_DEC_DIMS=half has no kernel for the cluster merge with each warp loading q"),
        ),
        (
            "half with q per CTA and no cluster",
            h200c,
            &[HALF, ("QSA_ATTN_DEC_QLOAD", "cta")],
            Q16,
            Refused("QSA_ATTN_DEC_DIMS=half has no kernel for QSA_ATTN_DEC_QLOAD=cta without the cluster merge"),
        ),
        (
            "a bad value",
            h200c,
            &[("QSA_ATTN_DEC_DIMS", "quarter")],
            Q16,
            Refused("QSA_ATTN_DEC_DIMS=quarter: expected whole or half"),
        ),
    ]);
}

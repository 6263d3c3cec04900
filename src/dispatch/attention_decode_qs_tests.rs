//! QSA_ATTN_DEC_QLOAD's dispatch: q staged once per CTA (`cta`, the `_qs_` kernels) on the two
//! issue-13 shapes, the shared bytes its tile adds, the forms it has no kernel for, and the
//! default (each warp's own loads) pinned until the card measures the staged form faster.
use super::*;

#[test]
fn q_staged_per_cta_plans_refusals_and_default() {
    use Want::*;
    check(&[
        (
            // 16 queries keep each warp's loads (DEFAULT_Q_CTA_PER_ITEM): the card never
            // measured the staged form >= 0.5 us faster at both groups (three runs, the
            // constant's comment); flipping it without that measurement fails here.
            "16 queries, auto: each warp loads q",
            h200,
            &[],
            Q16,
            Plan(&[
                ("q_cta", "false"),
                ("shared", "139264"),
                ("bf16 kernel", "qsa_attn_dec_fwd_bf16"),
            ]),
        ),
        (
            // One query stages q per CTA (DEFAULT_Q_CTA_CLUSTER): 0.3-0.4 us faster at both
            // groups in two of three H200 runs, the rule dechead.md set before them.
            "one query, auto: q staged per CTA (cluster pull merge)",
            h200c,
            &[],
            Q1,
            Plan(&[
                ("q_cta", "true"),
                ("shared", "79168"),
                ("bf16 kernel", "qsa_attn_dec_qs_cl_fwd_bf16"),
            ]),
        ),
        (
            // 8 warps x 2 stages (139264) + q's tile (16 x 136 x 2 = 4352).
            "16 queries, q per CTA",
            h200,
            &[("QSA_ATTN_DEC_QLOAD", "cta")],
            Q16,
            Plan(&[
                ("q_cta", "true"),
                ("shared", "143616"),
                ("opts", "0"),
                ("dispatch", "decode"),
                ("bf16 kernel", "qsa_attn_dec_qs_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_qs_fwd_f16"),
            ]),
        ),
        (
            // 8 warps x 1 stage: the cluster merge's 8 areas + CTA result (74816) > the ring
            // (69632), then q's tile.
            "one query, q per CTA: the cluster kernel",
            h200c,
            &[("QSA_ATTN_DEC_QLOAD", "cta")],
            Q1,
            Plan(&[
                ("q_cta", "true"),
                ("merge", "Cluster"),
                ("stages", "1"),
                ("shared", "79168"),
                ("dispatch", "decode_cluster"),
                ("bf16 kernel", "qsa_attn_dec_qs_cl_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_qs_cl_fwd_f16"),
            ]),
        ),
        (
            "one query, q per CTA without clusters: the ticket merge",
            h200,
            &[("QSA_ATTN_DEC_QLOAD", "cta")],
            Q1,
            Plan(&[
                ("merge", "Kernel"),
                ("shared", "73984"),
                ("bf16 kernel", "qsa_attn_dec_qs_fwd_bf16"),
            ]),
        ),
        (
            "q per CTA with a probe: the probe's bits, the qs kernel",
            h200,
            &[
                ("QSA_ATTN_DEC_QLOAD", "cta"),
                ("QSA_ATTN_DEC_PROBE", "list"),
            ],
            Q16,
            Plan(&[("opts", "4"), ("bf16 kernel", "qsa_attn_dec_qs_fwd_bf16")]),
        ),
        (
            "warp, said explicitly",
            h200,
            &[("QSA_ATTN_DEC_QLOAD", "warp")],
            Q16,
            Plan(&[("q_cta", "false"), ("bf16 kernel", "qsa_attn_dec_fwd_bf16")]),
        ),
        (
            "q per CTA with pairs",
            h200,
            &[("QSA_ATTN_DEC_QLOAD", "cta"), ("QSA_ATTN_DEC_PAIR", "1")],
            Q16,
            Refused("QSA_ATTN_DEC_QLOAD=cta has no QSA_ATTN_DEC_PAIR=1 kernel"),
        ),
        (
            "q per CTA with the dynamic order",
            h200,
            &[
                ("QSA_ATTN_DEC_QLOAD", "cta"),
                ("QSA_ATTN_DEC_ORDER", "dynamic"),
            ],
            Q16,
            Refused("QSA_ATTN_DEC_QLOAD=cta has no QSA_ATTN_DEC_ORDER=dynamic kernel"),
        ),
        (
            "q per CTA with the push merge",
            h200c,
            &[
                ("QSA_ATTN_DEC_QLOAD", "cta"),
                ("QSA_ATTN_DEC_MERGE", "push"),
            ],
            Q1,
            Refused("QSA_ATTN_DEC_QLOAD=cta has no QSA_ATTN_DEC_MERGE=push kernel"),
        ),
        (
            "q per CTA with the flat merge",
            h200c,
            &[
                ("QSA_ATTN_DEC_QLOAD", "cta"),
                ("QSA_ATTN_DEC_MERGE", "flat"),
            ],
            Q1,
            Refused("QSA_ATTN_DEC_QLOAD=cta has no QSA_ATTN_DEC_MERGE=flat kernel"),
        ),
        (
            "a bad value",
            h200,
            &[("QSA_ATTN_DEC_QLOAD", "smem")],
            Q16,
            Refused("QSA_ATTN_DEC_QLOAD=smem: expected warp or cta"),
        ),
        (
            // 8 warps x 4 stages (278528) is past sm_90's 232448 already; 8 x 3 + q fits.
            "q per CTA, 8 warps x 3 stages",
            h200,
            &[("QSA_ATTN_DEC_QLOAD", "cta"), ("QSA_ATTN_DEC_STAGES", "3")],
            Q16,
            Plan(&[("shared", "213248")]),
        ),
    ]);
}

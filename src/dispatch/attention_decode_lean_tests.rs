//! QSA_ATTN_DEC_MERGE=lean's dispatch (the `_lean_` kernels, the lean two-level merge): its plan
//! on the one-query shape (ring + inbox, the lean kernel with and without q staged per CTA), its
//! fallback without clusters, the forms it has no kernel for, the merge probes (`cta`,
//! `cluster`), and auto pinned to the pull merge until the card measures the lean one faster.
use super::*;

#[test]
fn lean_merge_plans_refusals_and_default() {
    use Want::*;
    check(&[
        (
            // The default the card measured (sessions 9-12): the pull merge, q staged per CTA
            // (session 12's call Q). The dec1q plan names the figure that would make the lean
            // merge the default; auto taking it before that measurement fails here.
            "one query, auto: the pull cluster merge",
            h200c,
            &[],
            Q1,
            Plan(&[
                ("merge", "Cluster"),
                ("dispatch", "decode_cluster"),
                ("bf16 kernel", "qsa_attn_dec_qs_cl_fwd_bf16"),
            ]),
        ),
        (
            // 8 warps x 1 stage (69632), the inbox past it (16 x 128 + 16 floats: 8256).
            "one query, lean merge",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "lean")],
            Q1,
            Plan(&[
                ("merge", "Lean"),
                ("nsplit", "8"),
                ("stages", "1"),
                ("shared", "77888"),
                ("opts", "0"),
                ("dispatch", "decode_lean"),
                ("bf16 kernel", "qsa_attn_dec_lean_cl_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_lean_cl_fwd_f16"),
            ]),
        ),
        (
            // q's tile (4352) past the inbox.
            "one query, lean merge, q per CTA",
            h200c,
            &[
                ("QSA_ATTN_DEC_MERGE", "lean"),
                ("QSA_ATTN_DEC_QLOAD", "cta"),
            ],
            Q1,
            Plan(&[
                ("q_cta", "true"),
                ("shared", "82240"),
                ("bf16 kernel", "qsa_attn_dec_lean_qs_cl_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_lean_qs_cl_fwd_f16"),
            ]),
        ),
        (
            // 16 queries: the lean form forces 8 splits as one cluster (a control row).
            "16 queries, lean merge: 8 splits",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "lean")],
            Q16,
            Plan(&[("merge", "Lean"), ("nsplit", "8")]),
        ),
        (
            "lean merge without clusters: the ticket merge",
            h200,
            &[("QSA_ATTN_DEC_MERGE", "lean")],
            Q1,
            Plan(&[("merge", "Kernel"), ("dispatch", "decode_split")]),
        ),
        (
            "lean merge at 4 splits",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "lean"), ("QSA_ATTN_DEC_SPLITS", "4")],
            Q1,
            Refused("QSA_ATTN_DEC_MERGE=lean runs 8 splits"),
        ),
        (
            "lean merge with pairs",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "lean"), ("QSA_ATTN_DEC_PAIR", "1")],
            Q1,
            Refused("QSA_ATTN_DEC_MERGE=lean has no QSA_ATTN_DEC_PAIR=1 kernel"),
        ),
        (
            "lean merge with the dynamic order",
            h200c,
            &[
                ("QSA_ATTN_DEC_MERGE", "lean"),
                ("QSA_ATTN_DEC_ORDER", "dynamic"),
            ],
            Q1,
            Refused("QSA_ATTN_DEC_MERGE=lean has no QSA_ATTN_DEC_ORDER=dynamic kernel"),
        ),
        (
            // The merge probes: cta (6), cluster (7), the lean kernel's own.
            "lean merge, probe=cta",
            h200c,
            &[
                ("QSA_ATTN_DEC_MERGE", "lean"),
                ("QSA_ATTN_DEC_PROBE", "cta"),
            ],
            Q1,
            Plan(&[
                ("probe", "Some(Cta)"),
                ("opts", "6"),
                ("bf16 kernel", "qsa_attn_dec_lean_cl_fwd_bf16"),
            ]),
        ),
        (
            "auto (q staged per CTA), probe=cluster",
            h200c,
            &[("QSA_ATTN_DEC_PROBE", "cluster")],
            Q1,
            Plan(&[
                ("probe", "Some(Cluster)"),
                ("opts", "7"),
                ("bf16 kernel", "qsa_attn_dec_qs_cl_fwd_bf16"),
            ]),
        ),
        (
            // push (16) | cluster (7)
            "push merge, probe=cluster",
            h200c,
            &[
                ("QSA_ATTN_DEC_MERGE", "push"),
                ("QSA_ATTN_DEC_PROBE", "cluster"),
            ],
            Q1,
            Plan(&[("opts", "23")]),
        ),
        (
            "probe=cta without clusters",
            h200,
            &[("QSA_ATTN_DEC_PROBE", "cta")],
            Q1,
            Refused("QSA_ATTN_DEC_PROBE=cta splits the cluster merge's levels: this plan merges by Kernel"),
        ),
        (
            "probe=merge",
            h200c,
            &[("QSA_ATTN_DEC_PROBE", "merge")],
            Q1,
            Refused("expected launch, no_kv, no_math, list, loop, cta or cluster"),
        ),
    ]);
}

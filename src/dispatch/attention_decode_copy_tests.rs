//! QSA_ATTN_DEC_COPY's dispatch: K/V rows by cp.async.bulk (`bulk`, the `_bk_` kernels) on the two
//! issue-13 shapes, the mbarrier bytes it adds, where it is refused (no sm_90a code, the forms it
//! has no kernel for), and the default (cp.async) pinned until the card measures bulk faster.
use super::*;

/// The H200 as the emulated and the card's sm_90 see it: clusters and sm_90a's wgmma code object
/// (where mbarrier.h's bulk copies are built).
fn h200w() -> TargetCaps {
    let mut c = h200c();
    c.features.push(Feature::Wgmma);
    c
}

/// An sm_90 run through its portable PTX (a newer card): no sm_90a code, so no bulk kernels.
fn h200_ptx() -> TargetCaps {
    h200c()
}

const BULK: (&str, &str) = ("QSA_ATTN_DEC_COPY", "bulk");

#[test]
fn bulk_copies_plans_refusals_and_default() {
    use Want::*;
    check(&[
        (
            // The default the card measured (session 13's call B: bulk 2.8 us slower): cp.async.
            // Flipping DEFAULT_BULK without a measurement that beats it fails here.
            "16 queries, auto: cp.async copies",
            h200w,
            &[],
            Q16,
            Plan(&[
                ("bulk", "false"),
                ("shared", "139264"),
                ("bf16 kernel", "qsa_attn_dec_fwd_bf16"),
            ]),
        ),
        (
            // One query's default stages q per CTA (session 12 call Q): the `_qs_` kernel.
            "one query, auto: cp.async copies (cluster pull merge, q per CTA)",
            h200w,
            &[],
            Q1,
            Plan(&[
                ("bulk", "false"),
                ("bf16 kernel", "qsa_attn_dec_qs_cl_fwd_bf16"),
            ]),
        ),
        (
            // 8 warps x 2 stages (139264) + 16 mbarriers of 8 bytes.
            "16 queries, bulk",
            h200w,
            &[BULK],
            Q16,
            Plan(&[
                ("bulk", "true"),
                ("warps", "8"),
                ("stages", "2"),
                ("shared", "139392"),
                ("opts", "0"),
                ("dispatch", "decode"),
                ("bf16 kernel", "qsa_attn_dec_bk_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_bk_fwd_f16"),
            ]),
        ),
        (
            // 8 warps x 1 stage: the cluster merge's areas + CTA result (74816) > the ring
            // (69632), then 8 mbarriers.
            // The staged-q default gives way: the `_bk_` kernels load q per warp.
            "one query, bulk: the cluster kernel",
            h200w,
            &[BULK],
            Q1,
            Plan(&[
                ("q_cta", "false"),
                ("merge", "Cluster"),
                ("stages", "1"),
                ("shared", "74880"),
                ("dispatch", "decode_cluster"),
                ("bf16 kernel", "qsa_attn_dec_bk_cl_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_bk_cl_fwd_f16"),
            ]),
        ),
        (
            "16 queries, bulk, copies only (the card's copy floor)",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_PROBE", "no_math")],
            Q16,
            Plan(&[("opts", "3"), ("bf16 kernel", "qsa_attn_dec_bk_fwd_bf16")]),
        ),
        (
            "16 queries, bulk, 6 warps x 4 stages",
            h200w,
            &[
                BULK,
                ("QSA_ATTN_DEC_WARPS", "6"),
                ("QSA_ATTN_DEC_STAGES", "4"),
            ],
            Q16,
            Plan(&[("shared", "209088")]),
        ),
        (
            "cp_async, said explicitly",
            h200w,
            &[("QSA_ATTN_DEC_COPY", "cp_async")],
            Q16,
            Plan(&[("bulk", "false"), ("bf16 kernel", "qsa_attn_dec_fwd_bf16")]),
        ),
        (
            "bulk through sm_90's portable PTX (no sm_90a code)",
            h200_ptx,
            &[BULK],
            Q16,
            Refused("QSA_ATTN_DEC_COPY=bulk needs sm_90a's cp.async.bulk"),
        ),
        (
            "bulk on sm_86",
            sm86,
            &[BULK],
            Q16,
            Refused("QSA_ATTN_DEC_COPY=bulk needs sm_90a's cp.async.bulk"),
        ),
        (
            "bulk with pairs",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_PAIR", "1")],
            Q16,
            Refused("QSA_ATTN_DEC_COPY=bulk has no QSA_ATTN_DEC_PAIR=1 kernel"),
        ),
        (
            "bulk with the dynamic order",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_ORDER", "dynamic")],
            Q16,
            Refused("QSA_ATTN_DEC_COPY=bulk has no QSA_ATTN_DEC_ORDER=dynamic kernel"),
        ),
        (
            "bulk with q per CTA",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_QLOAD", "cta")],
            Q16,
            Refused("QSA_ATTN_DEC_QLOAD=cta has no QSA_ATTN_DEC_COPY=bulk kernel"),
        ),
        (
            "bulk with the push merge",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_MERGE", "push")],
            Q1,
            Refused("QSA_ATTN_DEC_COPY=bulk has no QSA_ATTN_DEC_MERGE=push kernel"),
        ),
        (
            "bulk with the flat merge",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_MERGE", "flat")],
            Q1,
            Refused("QSA_ATTN_DEC_COPY=bulk has no QSA_ATTN_DEC_MERGE=flat kernel"),
        ),
        (
            "bulk with the lean merge",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_MERGE", "lean")],
            Q1,
            Refused("QSA_ATTN_DEC_COPY=bulk has no QSA_ATTN_DEC_MERGE=lean kernel"),
        ),
        (
            "bulk with cp.async's L2 prefetch size",
            h200w,
            &[BULK, ("QSA_ATTN_DEC_PREFETCH", "256")],
            Q16,
            Refused("QSA_ATTN_DEC_COPY=bulk has no QSA_ATTN_DEC_PREFETCH=256"),
        ),
        (
            "a bad value",
            h200w,
            &[("QSA_ATTN_DEC_COPY", "tma")],
            Q16,
            Refused("QSA_ATTN_DEC_COPY=tma: expected cp_async or bulk"),
        ),
    ]);
}

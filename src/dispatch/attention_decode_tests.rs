//! Decode dispatch tests: the plans the H200 and the other targets get, and every sweep
//! switch with its refusals. Each test is a table of named cases (a target, switches, a
//! shape, what the dispatch must answer); a failure names its case.
use super::*;

// Each sweep form's plans, refusals and pinned default: QSA_ATTN_DEC_QLOAD (the `_qs_` kernels),
// QSA_ATTN_DEC_MERGE=lean (the `_lean_` kernels) and the merge probes, QSA_ATTN_DEC_COPY (the
// `_bk_` kernels), QSA_ATTN_DEC_DIMS (the `_hd_` kernels).
#[path = "attention_decode_copy_tests.rs"]
mod copy;
#[path = "attention_decode_dims_tests.rs"]
mod dims;
#[path = "attention_decode_lean_tests.rs"]
mod lean;
#[path = "attention_decode_qs_tests.rs"]
mod qs;

fn caps(name: &str, shared: u32, sms: u32, tc: bool) -> TargetCaps {
    TargetCaps {
        name: name.into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: shared,
        multiprocessors: sms,
        features: if tc {
            vec![Feature::Tf32Tc, Feature::Bf16Tc]
        } else {
            vec![]
        },
    }
}

fn h200() -> TargetCaps {
    caps("sm_90", 232_448, 132, true)
}

/// The H200 with its thread-block clusters (without, the cluster and push merges fall back
/// to the ticket merge).
fn h200c() -> TargetCaps {
    let mut c = h200();
    c.features.push(Feature::Clusters);
    c
}

fn sm75() -> TargetCaps {
    caps("sm_75", 65_536, 68, false)
}

/// sm_86's 99 KiB of shared memory per block.
fn sm86() -> TargetCaps {
    caps("sm_86", 101_376, 82, true)
}

fn gfx950() -> TargetCaps {
    TargetCaps {
        vendor: Vendor::Amd,
        ..caps("gfx950", 163_840, 256, true)
    }
}

fn sw(pairs: &[(&str, &str)]) -> Switches {
    Switches::from_pairs(pairs)
}

/// decode_plan's shape: (batch, q_len, hq, hkv, t, backward).
type Shape = (usize, usize, usize, usize, usize, bool);
/// 16 queries x 8 KV heads, group 16: 128 items.
const Q16: Shape = (1, 16, 128, 8, 16, false);
/// One query x 8 KV heads, group 16: 8 items.
const Q1: Shape = (1, 1, 128, 8, 16, false);

/// What the dispatch must answer.
#[derive(Debug)]
enum Want {
    /// No decode plan: the staged kernel runs.
    Staged,
    /// A decode plan whose named fields (`field`) read so.
    Plan(&'static [(&'static str, &'static str)]),
    /// A refusal whose message holds this text.
    Refused(&'static str),
}

type Case = (
    &'static str,
    fn() -> TargetCaps,
    &'static [(&'static str, &'static str)],
    Shape,
    Want,
);

/// A plan's field by name, as the tables write it.
fn field(p: &DecodePlan, name: &str) -> String {
    match name {
        "items" => p.items.to_string(),
        "nsplit" => p.nsplit.to_string(),
        "warps" => p.warps.to_string(),
        "stages" => p.stages.to_string(),
        "shared" => p.shared.to_string(),
        "pair" => p.pair.to_string(),
        "merge" => format!("{:?}", p.merge),
        "l2_256" => p.l2_256.to_string(),
        "probe" => format!("{:?}", p.probe),
        "dynamic" => p.dynamic.to_string(),
        "q_cta" => p.q_cta.to_string(),
        "bulk" => p.bulk.to_string(),
        "half_dims" => p.half_dims.to_string(),
        "opts" => p.opts().to_string(),
        "dispatch" => dispatch_name(p).to_string(),
        "bf16 kernel" => p.kernel("bf16"),
        "f16 kernel" => p.kernel("f16"),
        _ => panic!("no plan field `{name}` in the test's field()"),
    }
}

fn check(cases: &[Case]) {
    for (name, target, pairs, s, want) in cases {
        let got = decode_plan(&target(), &sw(pairs), s.0, s.1, s.2, s.3, s.4, s.5);
        match (want, got) {
            (Want::Staged, Ok(None)) => {}
            (Want::Plan(fields), Ok(Some(p))) => {
                for (f, v) in *fields {
                    assert_eq!(field(&p, f), *v, "case `{name}`: {f} ({p:?})");
                }
            }
            (Want::Refused(text), Err(e)) => {
                let e = e.to_string();
                assert!(e.contains(text), "case `{name}`: `{e}` lacks `{text}`");
            }
            (want, got) => panic!("case `{name}`: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn h200_decode_shapes_take_the_decode_kernel() {
    use Want::*;
    check(&[
        (
            "16 queries: one CTA per item, 8 warps x 2 stages",
            h200,
            &[],
            Q16,
            Plan(&[
                ("items", "128"),
                ("nsplit", "1"),
                ("warps", "8"),
                ("stages", "2"),
                ("shared", "139264"),
                ("dispatch", "decode"),
            ]),
        ),
        (
            // 8 units over 8 warps, so a one-stage ring.
            "one query: 8 splits of two blocks, merged in-kernel",
            h200,
            &[],
            Q1,
            Plan(&[
                ("items", "8"),
                ("nsplit", "8"),
                ("merge", "Kernel"),
                ("stages", "1"),
                ("shared", "69632"),
                ("dispatch", "decode_split"),
            ]),
        ),
        (
            // MAX_ITEMS_PER_SM (6) on 132 SMs; measured crossover ~7.5 items per SM.
            "99 queries x 8 KV heads (792 items, 6 per SM): decode",
            h200,
            &[],
            (1, 99, 128, 8, 16, false),
            Plan(&[("items", "792")]),
        ),
        (
            "100 queries (one item per SM more): staged",
            h200,
            &[],
            (1, 100, 128, 8, 16, false),
            Staged,
        ),
        (
            "prefill: staged",
            h200,
            &[],
            (4, 16384, 64, 4, 16, false),
            Staged,
        ),
        (
            "backward: staged",
            h200,
            &[],
            (1, 16, 128, 8, 16, true),
            Staged,
        ),
        (
            "more ids than lanes: staged",
            h200,
            &[],
            (1, 16, 128, 8, 33, false),
            Staged,
        ),
    ]);
}

#[test]
fn only_tensor_core_nvidia_targets_build_it() {
    use Want::*;
    check(&[
        ("sm_75: staged", sm75, &[], Q1, Staged),
        (
            "sm_75, decode forced: staged (not built)",
            sm75,
            &[("QSA_ATTN_KERNEL", "decode")],
            Q1,
            Staged,
        ),
        ("gfx950: staged", gfx950, &[], Q1, Staged),
        (
            "sm_86's 99 KiB: one stage of eight warps",
            sm86,
            &[],
            Q16,
            Plan(&[("warps", "8"), ("stages", "1"), ("shared", "69632")]),
        ),
    ]);
}

#[test]
fn switches_sweep_and_bad_values_are_named() {
    use Want::*;
    check(&[
        (
            "warps, stages, splits, merge by a second launch",
            h200,
            &[
                ("QSA_ATTN_DEC_WARPS", "8"),
                ("QSA_ATTN_DEC_STAGES", "3"),
                ("QSA_ATTN_DEC_SPLITS", "2"),
                ("QSA_ATTN_DEC_MERGE", "launch"),
            ],
            Q16,
            Plan(&[
                ("warps", "8"),
                ("stages", "3"),
                ("nsplit", "2"),
                ("merge", "Launch"),
                ("dispatch", "decode_combine"),
                ("pair", "false"),
            ]),
        ),
        (
            "pairs of units: at least two stages",
            h200,
            &[("QSA_ATTN_DEC_PAIR", "1"), ("QSA_ATTN_DEC_STAGES", "1")],
            Q1,
            Plan(&[("pair", "true"), ("stages", "2")]),
        ),
        (
            "staged forced",
            h200,
            &[("QSA_ATTN_KERNEL", "staged")],
            Q1,
            Staged,
        ),
        (
            "merge=x",
            h200,
            &[("QSA_ATTN_DEC_MERGE", "x")],
            Q1,
            Refused("expected kernel, launch, cluster, push, flat or lean"),
        ),
        (
            // The CTA result after the warps' areas: 8 x 8320 + 8256 bytes over a one-stage
            // ring of 69632, then q's tile (4352; the cluster merge stages q by default).
            "cluster merge: eight splits",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "cluster")],
            Q1,
            Plan(&[
                ("merge", "Cluster"),
                ("nsplit", "8"),
                ("stages", "1"),
                ("shared", "79168"),
                ("dispatch", "decode_cluster"),
            ]),
        ),
        (
            "cluster merge without clusters: the ticket merge",
            h200,
            &[("QSA_ATTN_DEC_MERGE", "cluster")],
            Q1,
            Plan(&[("merge", "Kernel")]),
        ),
        (
            "cluster merge at 4 splits",
            h200c,
            &[
                ("QSA_ATTN_DEC_MERGE", "cluster"),
                ("QSA_ATTN_DEC_SPLITS", "4"),
            ],
            Q1,
            Refused("runs 8 splits"),
        ),
        (
            "warps=0",
            h200,
            &[("QSA_ATTN_DEC_WARPS", "0")],
            Q1,
            Refused("from 1 to 8"),
        ),
        (
            "129 splits: past the merge table, a second launch",
            h200,
            &[("QSA_ATTN_DEC_SPLITS", "129")],
            Q1,
            Plan(&[("merge", "Launch")]),
        ),
        (
            "129 splits merged in-kernel",
            h200,
            &[
                ("QSA_ATTN_DEC_SPLITS", "129"),
                ("QSA_ATTN_DEC_MERGE", "kernel"),
            ],
            Q1,
            Refused("at most 128 splits"),
        ),
        (
            // opts: the kernel's DEC_PROBE_* (0: the attention).
            "no probe",
            h200,
            &[],
            Q1,
            Plan(&[
                ("probe", "None"),
                ("opts", "0"),
                ("bf16 kernel", "qsa_attn_dec_fwd_bf16"),
            ]),
        ),
        (
            // Pairs pick their own bf16 kernel; f16 has no pair kernel.
            "probe=launch with pairs",
            h200,
            &[("QSA_ATTN_DEC_PROBE", "launch"), ("QSA_ATTN_DEC_PAIR", "1")],
            Q1,
            Plan(&[
                ("probe", "Some(Launch)"),
                ("opts", "1"),
                ("bf16 kernel", "qsa_attn_dec_fwd_pair_bf16"),
                ("f16 kernel", "qsa_attn_dec_fwd_f16"),
            ]),
        ),
        (
            "probe=no_kv with pairs",
            h200,
            &[("QSA_ATTN_DEC_PROBE", "no_kv"), ("QSA_ATTN_DEC_PAIR", "1")],
            Q1,
            Plan(&[
                ("probe", "Some(NoKv)"),
                ("opts", "2"),
                ("bf16 kernel", "qsa_attn_dec_fwd_pair_bf16"),
                ("f16 kernel", "qsa_attn_dec_fwd_f16"),
            ]),
        ),
        (
            "probe=no_math with pairs",
            h200,
            &[
                ("QSA_ATTN_DEC_PROBE", "no_math"),
                ("QSA_ATTN_DEC_PAIR", "1"),
            ],
            Q1,
            Plan(&[
                ("probe", "Some(NoMath)"),
                ("opts", "3"),
                ("bf16 kernel", "qsa_attn_dec_fwd_pair_bf16"),
                ("f16 kernel", "qsa_attn_dec_fwd_f16"),
            ]),
        ),
        (
            "probe=fast",
            h200,
            &[("QSA_ATTN_DEC_PROBE", "fast")],
            Q1,
            Refused("expected launch, no_kv, no_math, list, loop, cta or cluster"),
        ),
        (
            // The cluster kernel with opts bit 4, its inbox past the ring and the merge areas
            // (8 warps x 1 stage: max(69632, 66560) + 8256 bytes).
            "push merge",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "push")],
            Q1,
            Plan(&[
                ("merge", "Push"),
                ("nsplit", "8"),
                ("stages", "1"),
                ("shared", "77888"),
                ("opts", "16"),
                ("dispatch", "decode_push"),
                ("bf16 kernel", "qsa_attn_dec_cl_fwd_bf16"),
            ]),
        ),
        (
            // The one-query default on the H200: 8 splits as a cluster, the pull merge (CTA
            // merge, then the cluster's), q staged per CTA (attention_decode_qs_tests.rs).
            "one query, auto: the cluster merge",
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
            // Whatever the one-query default merge, the dynamic order and pairs keep the pull
            // merge (the flat kernels have neither).
            "one query, order=dynamic: the dynamic cluster kernel",
            h200c,
            &[("QSA_ATTN_DEC_ORDER", "dynamic")],
            Q1,
            Plan(&[
                ("merge", "Cluster"),
                ("bf16 kernel", "qsa_attn_dec_dyn_cl_fwd_bf16"),
            ]),
        ),
        (
            "one query, pair=1: the pair cluster kernel",
            h200c,
            &[("QSA_ATTN_DEC_PAIR", "1")],
            Q1,
            Plan(&[
                ("merge", "Cluster"),
                ("bf16 kernel", "qsa_attn_dec_cl_fwd_pair_bf16"),
            ]),
        ),
        (
            // The one-level merge: its own kernel, no opts bit, each warp's merge area over its
            // own ring (8 warps x 1 stage: 69632 bytes, no CTA result after the areas).
            "flat merge",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "flat")],
            Q1,
            Plan(&[
                ("merge", "Flat"),
                ("nsplit", "8"),
                ("stages", "1"),
                ("shared", "69632"),
                ("opts", "0"),
                ("dispatch", "decode_flat"),
                ("bf16 kernel", "qsa_attn_dec_flat_cl_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_flat_cl_fwd_f16"),
            ]),
        ),
        (
            "flat merge without clusters: the ticket merge",
            h200,
            &[("QSA_ATTN_DEC_MERGE", "flat")],
            Q1,
            Plan(&[("merge", "Kernel")]),
        ),
        (
            "flat merge with the dynamic order",
            h200c,
            &[
                ("QSA_ATTN_DEC_MERGE", "flat"),
                ("QSA_ATTN_DEC_ORDER", "dynamic"),
            ],
            Q1,
            Refused("QSA_ATTN_DEC_MERGE=flat has no QSA_ATTN_DEC_ORDER=dynamic kernel"),
        ),
        (
            "flat merge with pairs",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "flat"), ("QSA_ATTN_DEC_PAIR", "1")],
            Q1,
            Refused("QSA_ATTN_DEC_MERGE=flat has no QSA_ATTN_DEC_PAIR=1 kernel"),
        ),
        (
            "push merge without clusters: the ticket merge",
            h200,
            &[("QSA_ATTN_DEC_MERGE", "push")],
            Q1,
            Plan(&[("merge", "Kernel")]),
        ),
        (
            "push merge at 2 splits",
            h200c,
            &[("QSA_ATTN_DEC_MERGE", "push"), ("QSA_ATTN_DEC_SPLITS", "2")],
            Q1,
            Refused("QSA_ATTN_DEC_MERGE=push runs 8 splits"),
        ),
        (
            // The L2 prefetch bit (8) and the chain probes (loop: 5) combine with the rest.
            "prefetch=256 with probe=loop",
            h200,
            &[
                ("QSA_ATTN_DEC_PREFETCH", "256"),
                ("QSA_ATTN_DEC_PROBE", "loop"),
            ],
            Q16,
            Plan(&[("l2_256", "true"), ("probe", "Some(Loop)"), ("opts", "13")]),
        ),
        (
            // push (16) | list (4)
            "probe=list with the push merge",
            h200c,
            &[
                ("QSA_ATTN_DEC_PROBE", "list"),
                ("QSA_ATTN_DEC_MERGE", "push"),
            ],
            Q1,
            Plan(&[("opts", "20")]),
        ),
        (
            "prefetch=128",
            h200,
            &[("QSA_ATTN_DEC_PREFETCH", "128")],
            Q1,
            Refused("QSA_ATTN_DEC_PREFETCH=128: expected none or 256"),
        ),
        (
            // The dynamic order is its own kernels (`_dyn_`), plain and clustered; opts as ever.
            "order=dynamic",
            h200,
            &[("QSA_ATTN_DEC_ORDER", "dynamic")],
            Q16,
            Plan(&[
                ("dynamic", "true"),
                ("opts", "0"),
                ("bf16 kernel", "qsa_attn_dec_dyn_fwd_bf16"),
                ("f16 kernel", "qsa_attn_dec_dyn_fwd_f16"),
            ]),
        ),
        (
            "order=dynamic with the cluster merge and probe=loop",
            h200c,
            &[
                ("QSA_ATTN_DEC_ORDER", "dynamic"),
                ("QSA_ATTN_DEC_PROBE", "loop"),
            ],
            Q1,
            Plan(&[
                ("merge", "Cluster"),
                ("opts", "5"),
                ("bf16 kernel", "qsa_attn_dec_dyn_cl_fwd_bf16"),
            ]),
        ),
        (
            "order=dynamic with pairs",
            h200,
            &[
                ("QSA_ATTN_DEC_ORDER", "dynamic"),
                ("QSA_ATTN_DEC_PAIR", "1"),
            ],
            Q16,
            Refused("it has no QSA_ATTN_DEC_PAIR=1 kernel"),
        ),
        (
            "order=dynamic with look-ahead",
            h200,
            &[
                ("QSA_ATTN_DEC_ORDER", "dynamic"),
                ("QSA_ATTN_DEC_AHEAD", "2"),
            ],
            Q16,
            Refused("it has no L2 look-ahead"),
        ),
        (
            "order=random",
            h200,
            &[("QSA_ATTN_DEC_ORDER", "random")],
            Q16,
            Refused("expected contiguous, interleave or dynamic"),
        ),
        (
            "sm_86 at 4 stages: past its shared memory",
            sm86,
            &[("QSA_ATTN_DEC_STAGES", "4")],
            Q1,
            Refused("allows 101376"),
        ),
    ]);
}

/// The table's own check: a case whose answer differs fails, naming the case.
#[test]
#[should_panic(expected = "case `planted: 16 queries at 3 stages`: stages")]
fn a_wrong_answer_names_its_case() {
    check(&[(
        "planted: 16 queries at 3 stages",
        h200,
        &[],
        Q16,
        Want::Plan(&[("stages", "3")]),
    )]);
}

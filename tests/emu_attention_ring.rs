//! The ring forward (kernels/common/attention_ring_fwd.h: cp.async ring of K/V block slots, each
//! warp's own online softmax in registers, P from the S accumulators straight into the P.V
//! A fragments, one barrier per block) emulated on sm_86 and sm_90 through the GPU host code:
//! o and lse within the mma limit of FP64 (matrix.yaml gates.error_limits.attention.mma) and
//! within 4x of the gather kernel's own error (gates.error_ratio) where that is above the
//! floor, under the race check's schedules, on the matrix's emulated attention cases: partial
//! last KV block, -1 and repeated ids, causal edges, groups of 2, 4 and 8 (several tokens per
//! CTA with their selection masks), bf16 and f16, split lists (forced), slot counts and slots
//! of whole blocks or of K / V halves, both CTA orders, q's fragments in registers or read from
//! shared memory (qsa_attn_ring_qs_fwd_*), padded or swizzled slot rows (qsa_attn_ring_sw_fwd_*),
//! K / V rows copied by the CTA or by each warp for its own keys.

mod emu_matrix;

use emu_matrix::{caps, matrix, rel_max, switches};

use qsa::emu::{race, Schedule};
use qsa::problem::{AttnProblem, Output, Problem};
use qsa::reference::attention::attn_forward_f64;

/// gates.error_limits.attention.mma (floor = limit).
const MMA_LIMIT: f64 = 5e-5;

/// (o, lse) errors of one forward run, its dispatch name checked.
fn forward_errors(
    target: &str,
    sw: &[(&str, &str)],
    p: &AttnProblem,
    want: &qsa::reference::attention::AttnForwardF64,
    kernel: &str,
) -> (f64, f64) {
    // On sm_80+ the decode forward takes shapes this small (src/dispatch/attention_decode.rs);
    // these checks are about the staged family's forward (ring or staged), so that family is
    // forced unless the caller names a kernel.
    let mut sw: Vec<(&str, &str)> = sw.to_vec();
    if !sw.iter().any(|(k, _)| *k == "QSA_ATTN_KERNEL") {
        sw.push(("QSA_ATTN_KERNEL", "staged"));
    }
    let m = matrix();
    let caps = caps(&m, target);
    let run = race::check(
        &caps,
        &switches(&sw),
        &Problem::AttnForward(p.clone()),
        &Schedule::RACE_CHECK,
    )
    .unwrap_or_else(|e| panic!("{target} {sw:?}: {e}"));
    assert!(
        run.dispatched.starts_with(kernel),
        "{target} {sw:?}: dispatched {}, expected {kernel}",
        run.dispatched
    );
    let Output::AttnForward(o) = run.output else {
        panic!("{target}: no forward output")
    };
    (
        rel_max("o", &o.o, &want.o),
        rel_max("lse", &o.lse, &want.lse),
    )
}

#[test]
fn ring_forward_matches_fp64_on_the_emulated_cases() {
    let m = matrix();
    let cases = [
        ("attn_emu_g4", "random_ids"),
        ("attn_emu_g4", "repeat_ids"),
        ("attn_emu_g4", "invalid_ids"),
        ("attn_emu_g4", "causal_edge"),
        ("attn_emu_g8_f16", "random_ids"),
        ("attn_emu_g8_f16", "causal_edge"),
        ("attn_causal_start", "causal_edge"),
    ];
    for (case, dist) in cases {
        let c = m.cases.iter().find(|c| c.name == case).unwrap();
        let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
        let want = attn_forward_f64(&p, None).unwrap();
        let (go, gl) = forward_errors(
            "sm_90",
            &[("QSA_ATTN_KERNEL", "gather")],
            &p,
            &want,
            "gather",
        );
        for (target, sw) in [
            ("sm_90", vec![("QSA_ATTN_FWD", "ring")]),
            ("sm_86", vec![("QSA_ATTN_FWD", "ring")]),
            (
                "sm_90",
                vec![("QSA_ATTN_FWD", "ring"), ("QSA_ATTN_STAGES", "3")],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_STAGES", "4"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            // Slots of K or V rows: 4 by default, 3 (a block's K and V in different slots
            // turn by turn) and 7 (lists shorter than the ring) unsplit.
            (
                "sm_90",
                vec![("QSA_ATTN_FWD", "ring"), ("QSA_ATTN_RING_SLOT", "half")],
            ),
            // The CTAs walk (batch, kv head) first: same rows, another blockIdx decode.
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_ORDER", "head"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_ORDER", "head"),
                    ("QSA_ATTN_STAGES", "3"),
                ],
            ),
            // q's fragments from shared memory (qsa_attn_ring_qs_fwd_*): three slots of halves
            // (the four-CTA plan), whole blocks on sm_86, and with the head-major order.
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_Q", "shared"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "3"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_86",
                vec![("QSA_ATTN_FWD", "ring"), ("QSA_ATTN_RING_Q", "shared")],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_Q", "shared"),
                    ("QSA_ATTN_RING_ORDER", "head"),
                    ("QSA_ATTN_RING_PARTS", "2"),
                ],
            ),
            // Swizzled slot rows (qsa_attn_ring_sw_fwd_*): whole blocks split and not, three
            // slots of halves, sm_86, and with the lazy rescale.
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "3"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_86",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                    ("QSA_ATTN_RING_RESCALE", "lazy"),
                ],
            ),
            // Warp-local copies (QSA_ATTN_RING_COPY=warp: each warp its own keys' rows, a
            // __syncwarp per slot): whole blocks split and not, halves, the q tile, sm_86.
            (
                "sm_90",
                vec![("QSA_ATTN_FWD", "ring"), ("QSA_ATTN_RING_COPY", "warp")],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_COPY", "warp"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_COPY", "warp"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "5"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_COPY", "warp"),
                    ("QSA_ATTN_RING_Q", "shared"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "3"),
                    ("QSA_ATTN_RING_RESCALE", "lazy"),
                ],
            ),
            (
                "sm_86",
                vec![("QSA_ATTN_FWD", "ring"), ("QSA_ATTN_RING_COPY", "warp")],
            ),
            // The lazy running max (QSA_ATTN_RING_RESCALE=lazy), whole blocks and the q tile.
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_RESCALE", "lazy"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_RESCALE", "lazy"),
                    ("QSA_ATTN_RING_Q", "shared"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "3"),
                    ("QSA_ATTN_RING_ORDER", "head"),
                ],
            ),
            // bf16 P in two parts (f16 always runs two): within the gate, not the mutant's
            // one part.
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_PARTS", "2"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "3"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
            (
                "sm_90",
                vec![
                    ("QSA_ATTN_FWD", "ring"),
                    ("QSA_ATTN_RING_SLOT", "half"),
                    ("QSA_ATTN_STAGES", "7"),
                    ("QSA_ATTN_SPLITS", "1"),
                ],
            ),
        ] {
            let (eo, el) = forward_errors(target, &sw, &p, &want, "ring");
            let what = format!("{target} {case}/{dist} {sw:?}");
            eprintln!("{what}: o {eo:.2e} (gather {go:.2e}), lse {el:.2e} (gather {gl:.2e})");
            for (name, e, base) in [("o", eo, go), ("lse", el, gl)] {
                assert!(
                    e <= MMA_LIMIT,
                    "{what} {name}: relative max error {e:e} past the mma limit {MMA_LIMIT:e} \
                     (gather {base:e}): the ring forward lost keys, rows or precision"
                );
            }
        }
    }
}

/// QSA_ATTN_RING_RESCALE=lazy moves a row's running max only past a slack (bf16 8, f16 1 in
/// log2 units) and skips the O rescale where no row of a warp moved. With the cases' own scale
/// the logits spread ~1.4 log2 units, so after the first block the max never moves past the
/// slack: here the scale is raised to 2 (logits ~32 log2 units apart), so rows move late and
/// the lazy path's rescales run, against FP64 and against the exact path.
#[test]
fn lazy_rescale_matches_fp64_when_the_max_keeps_moving() {
    let m = matrix();
    for case in ["attn_emu_g4", "attn_emu_g8_f16"] {
        let c = m.cases.iter().find(|c| c.name == case).unwrap();
        let mut p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
        p.scale = 2.0;
        let want = attn_forward_f64(&p, None).unwrap();
        for sw in [
            vec![("QSA_ATTN_FWD", "ring"), ("QSA_ATTN_SPLITS", "1")],
            vec![
                ("QSA_ATTN_FWD", "ring"),
                ("QSA_ATTN_RING_RESCALE", "lazy"),
                ("QSA_ATTN_SPLITS", "1"),
            ],
            vec![
                ("QSA_ATTN_FWD", "ring"),
                ("QSA_ATTN_RING_RESCALE", "lazy"),
                ("QSA_ATTN_RING_Q", "shared"),
                ("QSA_ATTN_RING_SLOT", "half"),
                ("QSA_ATTN_STAGES", "3"),
            ],
            vec![
                ("QSA_ATTN_FWD", "ring"),
                ("QSA_ATTN_RING_RESCALE", "lazy"),
                ("QSA_ATTN_RING_LAYOUT", "swizzle"),
                ("QSA_ATTN_SPLITS", "1"),
            ],
        ] {
            let (eo, el) = forward_errors("sm_90", &sw, &p, &want, "ring");
            let what = format!("sm_90 {case} scale 2 {sw:?}");
            eprintln!("{what}: o {eo:.2e}, lse {el:.2e}");
            for (name, e) in [("o", eo), ("lse", el)] {
                assert!(
                    e <= MMA_LIMIT,
                    "{what} {name}: relative max error {e:e} past the mma limit {MMA_LIMIT:e}: \
                     the lazy rescale lost O's or l's scale when a row's max moved"
                );
            }
        }
    }
}

/// The default dispatch: the ring where lists are not split on sm_80+ CUDA, the staged kernel
/// where they are (decode) and on every target without bf16 tensor cores.
#[test]
fn ring_is_the_unsplit_forward_on_nvidia_tensor_cores_only() {
    let m = matrix();
    let c = m.cases.iter().find(|c| c.name == "attn_emu_g4").unwrap();
    let p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
    let want = attn_forward_f64(&p, None).unwrap();
    // attn_emu_g4 is a decode-sized grid: the plan splits, the staged kernel runs.
    forward_errors("sm_90", &[], &p, &want, "staged_split");
    // Unsplit: the ring, unless the warp forward is made the default (WARP_FWD_DEFAULT).
    let unsplit = if qsa::dispatch::attention_warp::WARP_FWD_DEFAULT {
        "warp"
    } else {
        "ring"
    };
    forward_errors("sm_90", &[("QSA_ATTN_SPLITS", "1")], &p, &want, unsplit);
    forward_errors("sm_75", &[("QSA_ATTN_FWD", "ring")], &p, &want, "staged");
    forward_errors("gfx950", &[("QSA_ATTN_FWD", "ring")], &p, &want, "staged");
}

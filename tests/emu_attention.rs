//! The selection-attention kernels (kernels/selection_attention.cu: gather and staged,
//! forward and backward, bf16 and f16) emulated through `EmuApi` and the GPU host code of
//! src/gpu/attention.rs with each AMD target's dispatch (LDS limit, wave 32 / 64, decode
//! splits): o, lse, dq, dk, dv within the f32 attention limit of FP64
//! (src/reference/attention.rs) under forward, reverse and random schedules (the backward's
//! float atomics within the race check's allowance); the NVIDIA targets' staged kernels
//! (FP32 on sm_75, mma.sync on sm_86 / sm_90) within their limits.

mod emu_matrix;

use emu_matrix::{caps, matrix, rel_max, switches};

use qsa::emu::{race, Schedule};
use qsa::problem::{Output, Problem};
use qsa::reference::attention::{attn_backward_f64, attn_forward_f64};

/// The matrix's f32 attention limit (gates.error_limits.attention.f32.limit).
const F32_LIMIT: f64 = 8e-6;

#[test]
fn gather_and_staged_match_fp64_forward_and_backward_on_amd() {
    let m = matrix();
    let gather = switches(&[("QSA_ATTN_KERNEL", "gather")]);
    let staged = switches(&[]);
    for target in ["gfx906", "gfx1201"] {
        let caps = caps(&m, target);
        for (case, dist) in [
            ("attn_emu_g4", "invalid_ids"),
            ("attn_emu_g8_f16", "causal_edge"),
        ] {
            let c = m.cases.iter().find(|c| c.name == case).unwrap();
            let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
            let fwd = attn_forward_f64(&p, None).unwrap();
            let bwd = attn_backward_f64(&p).unwrap();
            for (sw, kernel) in [(&gather, "gather"), (&staged, "staged")] {
                let what = format!("{target} {case}/{dist} {kernel}");
                let run = race::check(
                    &caps,
                    sw,
                    &Problem::AttnForward(p.clone()),
                    &Schedule::RACE_CHECK,
                )
                .unwrap_or_else(|e| panic!("{what} fwd: {e}"));
                assert!(
                    run.dispatched.starts_with(kernel),
                    "{what}: {}",
                    run.dispatched
                );
                let Output::AttnForward(o) = run.output else {
                    panic!("{what}: no forward output")
                };
                for (name, got, want) in [("o", &o.o, &fwd.o), ("lse", &o.lse, &fwd.lse)] {
                    let e = rel_max(name, got, want);
                    assert!(e <= F32_LIMIT, "{what} {name}: relative max error {e:e}");
                }
                let run = race::check(
                    &caps,
                    sw,
                    &Problem::AttnBackward(p.clone()),
                    &Schedule::RACE_CHECK,
                )
                .unwrap_or_else(|e| panic!("{what} bwd: {e}"));
                let Output::AttnBackward(g) = run.output else {
                    panic!("{what}: no gradients")
                };
                for (name, got, want) in [
                    ("dq", &g.dq, &bwd.dq),
                    ("dk", &g.dk, &bwd.dk),
                    ("dv", &g.dv, &bwd.dv),
                ] {
                    let e = rel_max(name, got, want);
                    assert!(e <= F32_LIMIT, "{what} {name}: relative max error {e:e}");
                }
            }
        }
    }
}

/// The NVIDIA targets' attention runs emulated too (the f16 conversion and the staged
/// kernels' mma.sync / ldmatrix / cp.async through kernels/common/emu_mma.h): sm_75's FP32
/// staged kernel within the f32 limit, sm_86's and sm_90's tensor-core decode forward and
/// staged backward within the mma limit (matrix.yaml gates.error_limits.attention.mma: 5e-5), forward and backward.
#[test]
fn nvidia_attention_matches_fp64_forward_and_backward() {
    let m = matrix();
    let c = m.cases.iter().find(|c| c.name == "attn_emu_g4").unwrap();
    let p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
    let fwd = attn_forward_f64(&p, None).unwrap();
    let bwd = attn_backward_f64(&p).unwrap();
    for (target, limit) in [("sm_75", F32_LIMIT), ("sm_86", 5e-5), ("sm_90", 5e-5)] {
        let caps = caps(&m, target);
        let run = race::check(
            &caps,
            &switches(&[]),
            &Problem::AttnForward(p.clone()),
            &Schedule::RACE_CHECK,
        )
        .unwrap_or_else(|e| panic!("{target} fwd: {e}"));
        // sm_80+ forward decode shapes take the decode kernel (tests/emu_attention_decode.rs).
        let want = if target == "sm_75" {
            "staged"
        } else {
            "decode"
        };
        assert!(
            run.dispatched.starts_with(want),
            "{target}: {}",
            run.dispatched
        );
        let Output::AttnForward(o) = run.output else {
            panic!("{target}: no forward output")
        };
        for (name, got, want) in [("o", &o.o, &fwd.o), ("lse", &o.lse, &fwd.lse)] {
            let e = rel_max(name, got, want);
            assert!(
                e <= limit,
                "{target} {name}: relative max error {e:e} past {limit:e}"
            );
        }
        let run = race::check(
            &caps,
            &switches(&[]),
            &Problem::AttnBackward(p.clone()),
            &Schedule::RACE_CHECK,
        )
        .unwrap_or_else(|e| panic!("{target} bwd: {e}"));
        let Output::AttnBackward(g) = run.output else {
            panic!("{target}: no gradients")
        };
        for (name, got, want) in [
            ("dq", &g.dq, &bwd.dq),
            ("dk", &g.dk, &bwd.dk),
            ("dv", &g.dv, &bwd.dv),
        ] {
            let e = rel_max(name, got, want);
            assert!(
                e <= limit,
                "{target} {name}: relative max error {e:e} past {limit:e}"
            );
        }
    }
}

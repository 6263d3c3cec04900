//! The selection-attention kernels (kernels/selection_attention.cu: gather and staged,
//! forward and backward, bf16 and f16) emulated through `EmuApi` and the GPU host code of
//! src/gpu/attention.rs with each AMD target's dispatch (LDS limit, wave 32 / 64, decode
//! splits): o, lse, dq, dk, dv within the f32 attention limit of FP64
//! (src/reference/attention.rs) under forward, reverse and random schedules (the backward's
//! float atomics within the race check's allowance); and on NVIDIA targets, whose source
//! keeps inline PTX in the host build, `unsupported in emulation` naming the instruction.

use qsa::backend::BackendError;
use qsa::dispatch::{Switches, TargetCaps};
use qsa::emu::{race, Schedule};
use qsa::matrix::Matrix;
use qsa::problem::{Output, Problem};
use qsa::reference::attention::{attn_backward_f64, attn_forward_f64};
use std::collections::BTreeMap;
use std::path::Path;

fn matrix() -> Matrix {
    Matrix::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.yaml")).unwrap()
}

fn caps(m: &Matrix, name: &str) -> TargetCaps {
    m.target(name).unwrap().caps()
}

fn switches(pairs: &[(&str, &str)]) -> Switches {
    Switches::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// The matrix's f32 attention limit (gates.error_limits.attention.f32.limit).
const F32_LIMIT: f64 = 8e-6;

fn rel_max(name: &str, got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{name}: length");
    let scale = want
        .iter()
        .filter(|x| x.is_finite())
        .fold(0f64, |a, x| a.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            if w.is_finite() {
                (g as f64 - w).abs() / scale
            } else if (g as f64) == w {
                0.0
            } else {
                f64::INFINITY
            }
        })
        .fold(0f64, f64::max)
}

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

/// sm_75's attention source converts f16 with inline PTX (cvt.f32.f16) in every build: the
/// whole module is unsupported in emulation, naming the kernel and the instruction.
#[test]
fn nvidia_attention_is_unsupported_naming_the_instruction() {
    let m = matrix();
    let c = m.cases.iter().find(|c| c.name == "attn_emu_g4").unwrap();
    let p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
    let e = race::check(
        &caps(&m, "sm_75"),
        &switches(&[]),
        &Problem::AttnForward(p),
        &[Schedule::Forward],
    )
    .err()
    .expect("sm_75's attention source keeps inline PTX");
    assert!(
        matches!(&e, BackendError::Unsupported(msg) if msg.starts_with("unsupported in emulation: qsa_attn_staged_fwd_bf16 (selection_attention.cu for sm_75) needs cvt.f32.f16")),
        "{e}"
    );
}

//! The block-score kernels (kernels/block_scores.cu) emulated through
//! `EmuApi` and the GPU host code of src/gpu/scores.rs with each target's dispatch: scores
//! within the f32 gate of FP64 (src/reference/scores.rs), the same under forward, reverse
//! and random thread schedules; and where the source does not build for the host yet
//! (tensor-core inline PTX on sm_80+), `unsupported in emulation` naming the kernel and the
//! instructions, never a pass (tests/emu/unemulated_asm.cu).

mod emu_matrix;

use emu_matrix::{caps, matrix, switches};

use qsa::backend::BackendError;
use qsa::cpu::scores::{scores_f32, ScoreOrder};
use qsa::emu::{race, Schedule};
use qsa::matrix::Matrix;
use qsa::problem::{Output, Problem};
use qsa::reference::scores::scores_f64;
use std::path::Path;

fn problem(m: &Matrix, case: &str, dist: &str) -> Problem {
    let c = m.cases.iter().find(|c| c.name == case).unwrap();
    Problem::Scores(qsa::cases::scores_problem(m.seed, c, dist).unwrap())
}

/// The matrix's f32 limit for scores (gates.error_limits.scores.f32.limit, 1e-6).
const F32_LIMIT: f64 = 1e-6;

#[test]
fn warp_and_simt_match_fp64_under_every_schedule() {
    let m = matrix();
    let simt = switches(&[("STRATA_QSA_WARP", "1")]);
    let warp = switches(&[("STRATA_QSA_WARP", "1"), ("STRATA_SELECT_SIMT", "0")]);
    for target in ["gfx906", "gfx1201", "sm_75"] {
        let caps = caps(&m, target);
        for (case, dist) in [
            ("scores_emu_tiles", "dup_blocks"),
            ("scores_ragged", "normal"),
        ] {
            let p = problem(&m, case, dist);
            let Problem::Scores(sp) = &p else {
                unreachable!()
            };
            let want = scores_f64(sp);
            let scale = want.iter().fold(0f64, |a, x| a.max(x.abs()));
            for (sw, kernel) in [(&simt, "simt"), (&warp, "warp")] {
                let run = race::check(&caps, sw, &p, &Schedule::RACE_CHECK)
                    .unwrap_or_else(|e| panic!("{target} {case} {kernel}: {e}"));
                assert_eq!(run.dispatched, kernel, "{target} {case}");
                let Output::Scores(got) = run.output else {
                    panic!("scores gave no scores")
                };
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| (*g as f64 - w).abs() / scale)
                    .fold(0f64, f64::max);
                assert!(
                    worst <= F32_LIMIT,
                    "{target} {case}/{dist} {kernel}: relative max error {worst:e} past {F32_LIMIT:e}"
                );
            }
        }
    }
}

/// 17 queries x 17 heads x 257 blocks: one past a whole SIMT tile in every dimension (16
/// queries, 8 heads per pass, 128 blocks), so the last query tile, head pass and block tile
/// each hold exactly one real row. Inputs of both signs (weights too), from a fixed integer
/// hash: no generator shared with the code under test.
fn one_past_each_tile() -> Problem {
    let (nq, heads, blocks) = (17, 17, 257);
    let val = |salt: u32, i: usize| {
        let x = (i as u32 ^ salt).wrapping_mul(0x9E37_79B9).rotate_left(13);
        (x % 2001) as f32 / 1000.0 - 1.0
    };
    Problem::Scores(qsa::problem::ScoresProblem {
        nq,
        heads,
        blocks,
        q: (0..nq * heads * 128).map(|i| val(1, i)).collect(),
        kb: (0..blocks * 128).map(|i| val(2, i)).collect(),
        w: (0..nq * heads).map(|i| val(3, i)).collect(),
    })
}

/// The SIMT kernels (both d-chunks) keep the contract's simt summation order, so their scores
/// equal the CPU backend's "simt" order bit for bit, tile edges included: scores_emu_tiles
/// (40 queries = 2 x 16 + 8, 10 heads = 8 + 2, 130 blocks = 128 + 2), scores_ragged (9 x 7
/// x 77: one partial tile in every dimension) and `one_past_each_tile`, on wave32 and wave64
/// targets. A kernel that
/// skips a partial tile or reorders a sum stays within the FP64 gate above yet fails here.
#[test]
fn simt_is_bit_identical_to_the_cpu_simt_order() {
    let m = matrix();
    for (target, chunk) in [
        ("sm_75", "8"),
        ("gfx906", "8"),
        ("sm_90", "8"),
        ("sm_90", "16"),
    ] {
        let sw = switches(&[("STRATA_QSA_WARP", "1"), ("QSA_SCORES_SIMT_DC", chunk)]);
        let problems = [
            (
                "scores_emu_tiles",
                "normal",
                problem(&m, "scores_emu_tiles", "normal"),
            ),
            (
                "scores_ragged",
                "relu_sparse",
                problem(&m, "scores_ragged", "relu_sparse"),
            ),
            ("17x17x257", "signed", one_past_each_tile()),
        ];
        for (case, dist, p) in &problems {
            let Problem::Scores(sp) = p else {
                unreachable!()
            };
            let want = scores_f32(sp, ScoreOrder::Simt);
            let run = race::check(&caps(&m, target), &sw, p, &Schedule::RACE_CHECK)
                .unwrap_or_else(|e| panic!("{target} {case} simt d{chunk}: {e}"));
            assert_eq!(run.dispatched, "simt", "{target} {case}");
            let Output::Scores(got) = run.output else {
                panic!("scores gave no scores")
            };
            assert_eq!(got.len(), want.len(), "{target} {case}: output length");
            let differ: Vec<usize> = (0..got.len())
                .filter(|&i| got[i].to_bits() != want[i].to_bits())
                .collect();
            if let Some(&i) = differ.first() {
                panic!(
                    "{target} {case}/{dist} simt (QSA_SCORES_SIMT_DC={chunk}): {} of {} scores \
                     differ from the CPU backend's simt order, first at query {}, block {}: \
                     kernel {:e}, cpu {:e}. The kernel left the contract's summation order \
                     (kernels/block_scores.cu, `simt:` at the top) or a tile edge",
                    differ.len(),
                    got.len(),
                    i / sp.blocks,
                    i % sp.blocks,
                    got[i],
                    want[i]
                );
            }
        }
    }
}

/// The tensor-core and matrix-core scorers run emulated (kernels/common/emu_mma.h) with each
/// target's dispatch, within their precision's limit of FP64 (matrix.yaml
/// gates.error_limits.scores: tf32 1.5e-3, bf16 1.5e-2): sm_86 and sm_90 TF32 (auto) and
/// BF16 mma.sync, gfx1201 WMMA and gfx950 MFMA (the `bf16` variant).
#[test]
fn tensor_and_matrix_core_scorers_match_fp64_within_their_limits() {
    let m = matrix();
    let auto = switches(&[]);
    let bf16 = switches(&[("STRATA_BF16_TC", "1")]);
    let p = problem(&m, "scores_emu_tiles", "normal");
    let Problem::Scores(sp) = &p else {
        unreachable!()
    };
    let want = scores_f64(sp);
    let scale = want.iter().fold(0f64, |a, x| a.max(x.abs()));
    for (target, sw, kernel, limit) in [
        ("sm_90", &auto, "tf32", 1.5e-3),
        ("sm_86", &auto, "tf32", 1.5e-3),
        ("sm_90", &bf16, "bf16", 1.5e-2),
        ("gfx1201", &bf16, "wmma_bf16", 1.5e-2),
        ("gfx950", &bf16, "mfma_bf16", 1.5e-2),
    ] {
        let run = race::check(&caps(&m, target), sw, &p, &Schedule::RACE_CHECK)
            .unwrap_or_else(|e| panic!("{target} {kernel}: {e}"));
        assert!(
            run.dispatched.starts_with(kernel),
            "{target}: dispatched {} (want {kernel})",
            run.dispatched
        );
        let Output::Scores(got) = run.output else {
            panic!("scores gave no scores")
        };
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).abs() / scale)
            .fold(0f64, f64::max);
        assert!(
            worst <= limit,
            "{target} {kernel}: relative max error {worst:e} past {limit:e}"
        );
    }
}

/// A kernel source that keeps an instruction the emulator does not model is `unsupported in
/// emulation`, naming the kernel and the instruction, never a pass and never a crash
/// (tests/emu/unemulated_asm.cu holds one inline-PTX `trap`).
#[test]
fn an_unemulated_instruction_is_unsupported_and_named() {
    let m = matrix();
    let api = qsa::emu::api::EmuApi::new(&caps(&m, "sm_90"), Schedule::Forward).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/emu/unemulated_asm.cu");
    let d = qsa::gpu::LaunchDims {
        grid: (1, 1, 1),
        block: (32, 1, 1),
        shared_bytes: 0,
    };
    let e = api
        .launch_source(&src, "uses_trap", d, &[])
        .expect_err("inline PTX cannot run on the host");
    let BackendError::Unsupported(msg) = &e else {
        panic!("not unsupported: {e}")
    };
    assert!(
        msg.starts_with("unsupported in emulation: uses_trap") && msg.contains("trap"),
        "{msg}"
    );
}

/// The decode scorers' persistent CTAs (src/gpu/scores/decode.rs): planned for one
/// multiprocessor, one or two CTAs per query group walk every tile of the call through their
/// cp.async ring (2 groups of one query of 3 m-tiles, forced: the dispatch takes one group
/// only; 600 blocks: 5 tiles of 128 with the default 4 warps, the last partial; 3 tiles of
/// 256 with 8 warps; the wgmma decode kernels: 10 tiles of 64, two or one CTA per group),
/// under the race check's schedules, within the tensor-core limits of FP64 (the same limits
/// as above).
#[test]
fn decode_scorers_walk_every_tile_under_the_race_check() {
    let m = matrix();
    let mut c = m
        .cases
        .iter()
        .find(|c| c.name == "scores_emu_decode")
        .unwrap()
        .clone();
    c.scores = Some(qsa::matrix::ScoresShape {
        queries: 2,
        heads: 40,
        blocks: 600,
    });
    let p = Problem::Scores(qsa::cases::scores_problem(m.seed, &c, "normal").unwrap());
    let Problem::Scores(sp) = &p else {
        unreachable!()
    };
    let want = scores_f64(sp);
    let scale = want.iter().fold(0f64, |a, x| a.max(x.abs()));
    let tile = ("QSA_SCORES_TILE", "decode");
    let mma = ("QSA_SCORES_DECODE_ENGINE", "mma");
    let bf16 = switches(&[("STRATA_BF16_TC", "1"), tile, mma]);
    // The wgmma decode kernels (sm_90a: the emulated sm_90 has them): 10 tiles of 64 blocks.
    let wg = ("QSA_SCORES_DECODE_ENGINE", "wgmma");
    let bf16_wg = switches(&[("STRATA_BF16_TC", "1"), tile, wg]);
    let (tma2, tma3) = (
        ("QSA_SCORES_DECODE_WG_TMA", "2"),
        ("QSA_SCORES_DECODE_WG_TMA", "3"),
    );
    // The register kernel, pinned: TF32's default is the TMA ring (4 slots, two consumer
    // warpgroups) since session 9, checked by the unswitched row below.
    let regs = ("QSA_SCORES_DECODE_WG_TMA", "off");
    for (target, sw, kernel, limit) in [
        ("sm_90", &switches(&[tile, mma]), "tf32_decode", 1.5e-3),
        (
            "sm_90",
            &switches(&[tile, mma, ("QSA_SCORES_DECODE_WARPS", "8")]),
            "tf32_decode",
            1.5e-3,
        ),
        ("sm_86", &switches(&[tile]), "tf32_decode", 1.5e-3),
        ("sm_90", &bf16, "bf16_decode", 1.5e-2),
        (
            "sm_90",
            &switches(&[tile, wg, regs]),
            "tf32_decode_wg",
            1.5e-3,
        ),
        (
            "sm_90",
            &switches(&[tile, wg, regs, ("QSA_SCORES_DECODE_CTAS_PER_SM", "1")]),
            "tf32_decode_wg",
            1.5e-3,
        ),
        ("sm_90", &switches(&[tile, wg]), "tf32_decode_tma2", 1.5e-3),
        ("sm_90", &bf16_wg, "bf16_decode_wg", 1.5e-2),
        // The TMA-fed kernels (a producer warp, mbarrier ring): 2 slots over 5 tiles per CTA
        // (each slot reused), 3 slots and two consumer warpgroups, BF16. The race check's
        // schedules land bulk copies eagerly and lazily (emu_mbarrier.h).
        (
            "sm_90",
            &switches(&[tile, wg, tma2]),
            "tf32_decode_tma",
            1.5e-3,
        ),
        (
            "sm_90",
            &switches(&[tile, wg, tma3, ("QSA_SCORES_DECODE_WG_GROUPS", "2")]),
            "tf32_decode_tma2",
            1.5e-3,
        ),
        (
            "sm_90",
            &switches(&[("STRATA_BF16_TC", "1"), tile, wg, tma2]),
            "bf16_decode_tma",
            1.5e-2,
        ),
    ] {
        let mut one_sm = caps(&m, target);
        one_sm.multiprocessors = 1;
        let run = race::check(&one_sm, sw, &p, &Schedule::RACE_CHECK)
            .unwrap_or_else(|e| panic!("{target} {kernel}: {e}"));
        assert_eq!(run.dispatched, kernel, "{target}");
        let Output::Scores(got) = run.output else {
            panic!("scores gave no scores")
        };
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).abs() / scale)
            .fold(0f64, f64::max);
        assert!(
            worst <= limit,
            "{target} {kernel}: relative max error {worst:e} past {limit:e}"
        );
    }
}

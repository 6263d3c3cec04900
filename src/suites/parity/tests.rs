//! The selection bound's arithmetic and the parity messages, with hand numbers (cargo mutants
//! 2026-12-01: the end-to-end selection check ran only in the matrix, so its rounding, bound
//! and swap rule had no library test; the id comparison's message was pinned by query 0 only).

use super::*;
use crate::suites::test_util::{blank_record, dumped};

/// TF32 keeps 10 of f32's 23 mantissa bits and rounds to nearest, ties away from zero
/// (cvt.rna): 1 + 2^-11 is halfway between 1 and 1 + 2^-10 and goes up (ties-to-even would
/// give 1); a carry out of the mantissa bumps the exponent; NaN and inf pass unchanged.
#[test]
fn tf32_rounding_by_hand() {
    let cases: [(u32, u32, &str); 10] = [
        (0x3f80_0000, 0x3f80_0000, "1 is exact"),
        (
            0x3f80_1000,
            0x3f80_2000,
            "1 + 2^-11: a tie, away from zero: 1 + 2^-10",
        ),
        (0x3f80_0fff, 0x3f80_0000, "just below the tie: down to 1"),
        (
            0x3f80_1001,
            0x3f80_2000,
            "just above the tie: up to 1 + 2^-10",
        ),
        (
            0x3f80_3000,
            0x3f80_4000,
            "1 + 3 x 2^-11: a tie, up to 1 + 2^-9",
        ),
        (
            0xbf80_1000,
            0xbf80_2000,
            "-(1 + 2^-11): away from zero: -(1 + 2^-10)",
        ),
        (
            0x3fff_f000,
            0x4000_0000,
            "2 - 2^-11: a tie, the carry makes 2",
        ),
        (0x7f80_0000, 0x7f80_0000, "+inf stays +inf"),
        (
            0x7f80_0001,
            0x7f80_0001,
            "a NaN whose payload is all low bits stays that NaN",
        ),
        (
            0x7f7f_ffff,
            0x7f80_0000,
            "f32::MAX rounds away, past TF32's largest, to inf",
        ),
    ];
    for (x, want, why) in cases {
        let got = round_tf32(f32::from_bits(x)).to_bits();
        assert_eq!(
            got, want,
            "round_tf32({x:#010x}) = {got:#010x}, by hand {want:#010x}: {why}"
        );
    }
}

/// BF16 keeps 7 mantissa bits and rounds to nearest, ties to even (cvt.rn.bf16x2).
#[test]
fn bf16_rounding_by_hand() {
    let cases: [(u32, u32, &str); 7] = [
        (0x3f80_8000, 0x3f80_0000, "1 + 2^-8: a tie, to even: 1"),
        (
            0x3f81_8000,
            0x3f82_0000,
            "1 + 3 x 2^-8: a tie, to even: 1 + 2^-6",
        ),
        (
            0x3f80_8001,
            0x3f81_0000,
            "just above the tie: up to 1 + 2^-7",
        ),
        (
            0xbf81_8000,
            0xbf82_0000,
            "-(1 + 3 x 2^-8): to even: -(1 + 2^-6)",
        ),
        (
            0x3fff_8000,
            0x4000_0000,
            "2 - 2^-9: a tie, to even with a carry: 2",
        ),
        (0x3e80_0000, 0x3e80_0000, "0.25 is exact"),
        (0xff80_0000, 0xff80_0000, "-inf stays -inf"),
    ];
    for (x, want, why) in cases {
        let got = round_bf16(f32::from_bits(x)).to_bits();
        assert_eq!(
            got, want,
            "round_bf16({x:#010x}) = {got:#010x}, by hand {want:#010x}: {why}"
        );
    }
    assert!(round_bf16(f32::NAN).is_nan(), "NaN stays NaN");
}

/// The unit roundoff of each scorer's inputs: half an ulp of 1 in its format.
#[test]
fn input_roundoff_by_kernel() {
    for (kernel, u) in [
        ("tf32", 0.00048828125), // 2^-11: 10 explicit mantissa bits
        ("tf32_decode", 0.00048828125),
        ("bf16", 0.00390625), // 2^-8: 7 explicit mantissa bits
        ("bf16_decode", 0.00390625),
        ("wmma_bf16", 0.00390625),
        ("mfma_bf16", 0.00390625),
        ("warp", 0.0), // f32 inputs are used as they are
        ("simt", 0.0),
    ] {
        assert_eq!(
            input_roundoff(kernel),
            u,
            "input_roundoff({kernel}): the selection bound would be computed for the wrong format"
        );
    }
}

/// One query, one head, two blocks; Q and Kb are zero past d = 1 (dots 5 and 6).
fn small_scores_problem() -> ScoresProblem {
    use crate::problem::HEAD_DIM;
    let mut q = vec![0.0f32; HEAD_DIM];
    q[0] = 1.0;
    q[1] = 2.0;
    let mut kb = vec![0.0f32; 2 * HEAD_DIM];
    kb[0] = 3.0;
    kb[1] = 1.0;
    kb[HEAD_DIM] = -2.0;
    kb[HEAD_DIM + 1] = 4.0;
    ScoresProblem {
        nq: 1,
        heads: 1,
        blocks: 2,
        q,
        kb,
        w: vec![0.5],
    }
}

/// `Bounds::for_kernel` is the rigorous bound (pinned term by term in reference/scores.rs)
/// at the kernel's input roundoff and f32 accumulation (u_acc = 2^-24), computed once per
/// format and handed back for the right format afterwards.
#[test]
fn the_selection_bound_follows_the_kernels_input_format() {
    let p = small_scores_problem();
    let u_acc = 5.960_464_477_539_063e-8; // 2^-24: f32 round to nearest
    let mut bounds = Bounds::default();
    // bf16 first, then tf32: a cache that handed back the first format's bound for a later
    // one would give tf32 the (8x wider) bf16 bound.
    for (kernel, u_in) in [
        ("bf16", 0.00390625),
        ("tf32", 0.00048828125),
        ("warp", 0.0),
        ("wmma_bf16", 0.00390625),
        ("tf32_decode", 0.00048828125),
        ("simt", 0.0),
    ] {
        let want = reference::scores::scores_error_bound(&p, u_in, u_acc);
        let got = bounds.for_kernel(&p, kernel).to_vec();
        assert_eq!(
            got, want,
            "Bounds::for_kernel({kernel}) is not the rigorous bound at u_in {u_in:e}, u_acc 2^-24"
        );
    }
    assert_eq!(bounds.by_format.len(), 3, "one bound per input format");
    // The wider the input format's roundoff, the wider the bound (block 0: dot 5).
    let mut b = |k: &str| bounds.for_kernel(&p, k)[0];
    let (f32_b, tf32_b, bf16_b) = (b("warp"), b("tf32"), b("bf16"));
    assert!(
        f32_b < tf32_b && tf32_b < bf16_b,
        "{f32_b:e} {tf32_b:e} {bf16_b:e}"
    );
}

/// Two queries, three blocks, k = 2. Query 0: the kernel's f32 scores select what FP64
/// selects. Query 1: FP64 scores (4, 2, 1.75) select {0, 1}; the kernel's (4, 1.5, 1.875)
/// select {0, 2}: it took block 2 over block 1, an FP64 gap of 2 - 1.75 = 0.25.
fn swap_in_query_1(bound_1: f64) -> Record {
    let p = ScoresProblem {
        nq: 2,
        heads: 1,
        blocks: 3,
        q: Vec::new(),
        kb: Vec::new(),
        w: Vec::new(),
    };
    let s64 = [4.0, 2.0, 1.0, 4.0, 2.0, 1.75];
    let s32 = [4.0, 2.0, 1.0, 4.0, 1.5, 1.875];
    let bound = [0.0, 0.0, 0.0, 0.0, bound_1, bound_1];
    let want = reference::topk::topk_ids_f64(&s64, 2, 3, 2, None);
    assert_eq!(want, [0, 1, 0, 1], "FP64 selection by hand");
    let mut rec = blank_record();
    compare_selection(&mut rec, &p, 2, &s32, &s64, &bound, &want);
    rec
}

/// A swap is justified iff the FP64 gap is at most the two scores' bounds together: here
/// the gap 0.25 against bounds of 0.125 each (exactly at the limit: justified) and of
/// 0.125 - 2^-11 each (just outside: a failure naming the query, the ids, gap and bound).
#[test]
fn a_swap_inside_the_bound_is_justified_and_one_just_outside_fails() {
    let inside = swap_in_query_1(0.125);
    assert_eq!(inside.status, Status::Pass, "{}", inside.message);
    assert_eq!(
        inside.message,
        "1 justified swaps: q1: took 2 over 1 (1 swapped), FP64 gap 2.500e-1, bound 2.500e-1"
    );
    assert_eq!(
        inside.snapshot.as_deref(),
        Some("select k=2 swaps 1 unjustified 0")
    );
    assert_eq!(
        (inside.metrics["swaps"], inside.metrics["unjustified"]),
        (1.0, 0.0)
    );

    let outside = swap_in_query_1(0.125 - 0.00048828125);
    assert_eq!(
        outside.status,
        Status::Fail,
        "a swap 2^-10 past the bound passed: {}",
        outside.message
    );
    assert_eq!(
        outside.message,
        "1 selection differences beyond the error bound (first: q1: took 2 over 1 (1 swapped), FP64 gap 2.500e-1, bound 2.490e-1); 0 justified"
    );
    assert_eq!(
        outside.snapshot.as_deref(),
        Some("select k=2 swaps 0 unjustified 1")
    );
    assert_eq!(
        (outside.metrics["swaps"], outside.metrics["unjustified"]),
        (0.0, 1.0)
    );

    // No swap at all: a pass with nothing to say.
    let mut same = blank_record();
    let s = [4.0, 2.0, 1.0];
    compare_selection(
        &mut same,
        &ScoresProblem {
            nq: 1,
            heads: 1,
            blocks: 3,
            q: Vec::new(),
            kb: Vec::new(),
            w: Vec::new(),
        },
        2,
        &s,
        &[4.0, 2.0, 1.0],
        &[0.0; 3],
        &[0, 1],
    );
    assert_eq!((same.status, same.message.as_str()), (Status::Pass, ""));
    assert_eq!(
        same.snapshot.as_deref(),
        Some("select k=2 swaps 0 unjustified 0")
    );
}

/// A scorer that returns the wrong number of scores fails before any selection.
#[test]
fn a_short_score_array_fails_the_selection_check() {
    let p = ScoresProblem {
        nq: 2,
        heads: 1,
        blocks: 3,
        q: Vec::new(),
        kb: Vec::new(),
        w: Vec::new(),
    };
    let mut rec = blank_record();
    compare_selection(
        &mut rec,
        &p,
        2,
        &[0.0; 5],
        &[0.0; 6],
        &[0.0; 6],
        &[0, 1, 0, 1],
    );
    assert_eq!(rec.status, Status::Fail);
    assert_eq!(rec.message, "got 5 scores, expected 6");
}

fn topk_problem(active: Vec<i32>) -> TopkProblem {
    TopkProblem {
        nq: active.len(),
        n: 8,
        capacity: 8,
        k: 3,
        scores: vec![0.0; 8 * active.len()],
        active: Some(active),
    }
}

/// The id comparison names the first differing query (here query 1 of 3, not query 0),
/// with its candidate count and the ids missing and unexpected there, and counts every
/// differing query; ids only reordered, or -1 padding alone, are said to be the same set.
#[test]
fn compare_ids_names_the_first_differing_query() {
    let p = topk_problem(vec![8, 5, 7]);
    let want = [0, 1, 2, 1, 3, 4, 2, 5, -1];
    let got = [0, 1, 2, 1, 3, 6, 5, 2, -1];
    let mut rec = blank_record();
    compare_ids(&mut rec, &p, &want, &got);
    assert_eq!(rec.status, Status::Fail);
    assert_eq!(
        rec.message,
        "2 of 3 queries differ from the reference; first: query 1 (candidates 5): missing ids [4], unexpected ids [6]"
    );
    assert_eq!(rec.metrics["queries_differing"], 2.0);

    // Only the order differs in query 0.
    let p = topk_problem(vec![8]);
    let mut rec = blank_record();
    compare_ids(&mut rec, &p, &[2, 5, -1], &[5, 2, -1]);
    assert_eq!(
        rec.message,
        "1 of 1 queries differ from the reference; first: query 0 (candidates 8): missing ids [], unexpected ids [] (same set: order or -1 padding differs)"
    );
    // A kernel that selected fewer: an id missing, none unexpected, not the same set.
    let mut rec = blank_record();
    compare_ids(&mut rec, &p, &[2, 5, -1], &[2, -1, -1]);
    assert_eq!(
        rec.message,
        "1 of 1 queries differ from the reference; first: query 0 (candidates 8): missing ids [5], unexpected ids []"
    );
    // Equal ids: a pass, and the count of differing queries is 0.
    let mut rec = blank_record();
    compare_ids(&mut rec, &p, &[2, 5, -1], &[2, 5, -1]);
    assert_eq!((rec.status, rec.message.as_str()), (Status::Pass, ""));
    assert_eq!(rec.metrics["queries_differing"], 0.0);
}

/// What `--dump` writes for a selection check: the inputs, the kernel's scores and ids, the
/// FP64 scores, ids and bound, each in its shape.
#[test]
fn a_selection_dump_holds_every_array_in_its_shape() {
    let p = small_scores_problem();
    let (s32, s64, bound) = ([5.0f32, 3.0], [5.0, 3.0], [1e-6, 1e-6]);
    let files = dumped(select_arrays(&p, 1, &s32, &s64, &bound, &[0]));
    let want: Vec<(String, Vec<usize>)> = [
        ("input_q.npy", vec![1, 1, 128]),
        ("input_kb.npy", vec![2, 128]),
        ("input_w.npy", vec![1, 1]),
        ("output_scores.npy", vec![1, 2]),
        ("output_ids.npy", vec![1, 1]),
        ("reference_scores.npy", vec![1, 2]),
        ("reference_ids.npy", vec![1, 1]),
        ("reference_bound.npy", vec![1, 2]),
    ]
    .into_iter()
    .map(|(f, s)| (f.to_string(), s))
    .collect();
    assert_eq!(files, want);
}

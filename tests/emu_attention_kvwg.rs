//! The wgmma backward (`QSA_ATTN_KV_MMA=wg` / `wgp` / `wg2` / `wg2a`, and wg2a with
//! `QSA_ATTN_KV_DP_PARTS=3`: kernels/common/attention_kv_wg.h) on the
//! emulated sm_90 under the wave-first schedule beside the forward one. The runner's race
//! check compares forward and reverse orders, in which the four warps advance in step between
//! collectives, so a missing barrier between one warp's shared stores and another warp's
//! wgmma or ldmatrix reads goes unseen there; wave-first runs one warp at a time as far as it
//! can, so such a read sees poison (or the previous tile's rows) and misses FP64 or differs
//! from the forward order. Cases: group 4 (one tile per block) and group 16 over 40 tokens
//! (up to 10 tiles of 4 tokens per block: the double-buffered form's buffer reuse; wg2's two
//! warpgroups each take several tiles, their named barriers and the dK / dV reduction), and
//! group 1 over 300 tokens (two chunks of the token scan, one warpgroup idle in the first).

mod emu_matrix;

use emu_matrix::{caps, matrix, rel_max, switches};

use qsa::emu::{race, Schedule};
use qsa::matrix::{Case, Matrix};
use qsa::problem::{Output, Problem};
use qsa::reference::attention::attn_backward_f64;

/// matrix.yaml's gates.error_limits.attention.mma.limit.
const MMA_LIMIT: f64 = 5e-5;

/// matrix.yaml's attn_emu_g4 (its dtype, ids and seed) as `name`, with (batch, q_len, kv_len,
/// hq, hkv, t) replaced where `dims` gives them.
fn emu_g4_as(m: &Matrix, name: &str, dims: Option<[usize; 6]>) -> Case {
    let mut c = m
        .cases
        .iter()
        .find(|c| c.name == "attn_emu_g4")
        .expect("matrix.yaml has attn_emu_g4")
        .clone();
    c.name = name.into();
    if let Some([batch, q_len, kv_len, hq, hkv, t]) = dims {
        let s = c
            .attention
            .as_mut()
            .expect("attn_emu_g4 is an attention case");
        (s.batch, s.q_len, s.kv_len, s.hq, s.hkv, s.t) = (batch, q_len, kv_len, hq, hkv, t);
    }
    c
}

/// Group 16 over 40 tokens: up to 10 tiles of 4 tokens per block.
fn g16_40_tokens(m: &Matrix) -> Case {
    emu_g4_as(
        m,
        "attn_emu_g4 as g16, 40 tokens",
        Some([1, 40, 200, 16, 1, 2]),
    )
}

/// examples/cases/attn-kv16-forms.yaml's attn_kvf_g1_two_chunks (same name, same ids): block 0
/// scans two chunks of 256 tokens.
fn g1_two_chunks(m: &Matrix) -> Case {
    emu_g4_as(m, "attn_kvf_g1_two_chunks", Some([1, 300, 300, 1, 1, 1]))
}

#[test]
fn wgmma_backward_matches_fp64_with_one_warp_at_a_time() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let base = emu_g4_as(&m, "attn_emu_g4", None);
    let g16 = g16_40_tokens(&m);
    // Two chunks: under causal_edge the first holds 64 tokens (one tile: wg2's warpgroup 0
    // takes it, warpgroup 1 none), where racecheck reported wg2's hazard (session 11 call C)
    // and the emulator's barrier-balance check fails without wg2's catch-up barriers.
    let two = g1_two_chunks(&m);
    for (c, dist) in [
        (&base, "random_ids"),
        (&g16, "causal_edge"),
        (&two, "causal_edge"),
    ] {
        let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
        let want = attn_backward_f64(&p).unwrap();
        for (mma, parts, kernel) in [
            ("wg", "2", "qsa_attn_kvwg_dq_bwd_bf16"),
            ("wgp", "2", "qsa_attn_kvwgp_dq_bwd_bf16"),
            ("wg2", "2", "qsa_attn_kvwg2_dq_bwd_bf16"),
            ("wg2a", "2", "qsa_attn_kvwg2a_dq_bwd_bf16"),
            ("wg2a", "3", "qsa_attn_kvwg2a3_dq_bwd_bf16"),
        ] {
            let what = format!("{}/{dist} {kernel}", c.name);
            let sw = switches(&[
                ("QSA_ATTN_BWD", "kvdq"),
                ("QSA_ATTN_KV_MMA", mma),
                ("QSA_ATTN_KV_DP_PARTS", parts),
            ]);
            within_gate(&caps, &sw, &p, &want, kernel, &what, "");
        }
    }
}

/// wg2a3's third dO part is in dP: on the same inputs its dq / dk errors against FP64 are well
/// under wg2a's (two parts). The 5e-5 gate cannot see a lost or misplaced third part on the
/// emulator's short cases (two parts pass them: on random V the dropped part costs ~2^-18
/// relative; the card's T=16K case is where they fail), so this compares the two forms on V
/// whose rows differ by 2^-7 only (1 +- 2^-7, sign by dimension): dS = P dO (V_j - O) is then
/// ~2^-7 of dO V_j, and the two-part rounding of dP = dO V_j is ~2^7 times larger relative to
/// it (dV does not involve dP, so it is not compared).
#[test]
fn the_three_part_wgmma_form_is_more_exact_than_two_parts() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    // Named as attn_emu_g4 (the name seeds the inputs: these are the ids it was written on).
    let c = emu_g4_as(&m, "attn_emu_g4", Some([1, 40, 200, 16, 1, 2]));
    let mut p = qsa::cases::attn_problem(m.seed, &c, "random_ids").unwrap();
    // bf16 bits of 1 - 2^-7, 1, 1 + 2^-7 (and their negatives), picked by the old bits.
    const NEAR_ONE: [u16; 3] = [0x3F7E, 0x3F80, 0x3F81];
    for (i, x) in p.v.iter_mut().enumerate() {
        let sign = if i % 2 == 0 { 0 } else { 0x8000 };
        *x = NEAR_ONE[(*x % 3) as usize] | sign;
    }
    let want = attn_backward_f64(&p).unwrap();
    let errors = |parts: &str| {
        let sw = switches(&[
            ("QSA_ATTN_BWD", "kvdq"),
            ("QSA_ATTN_KV_MMA", "wg2a"),
            ("QSA_ATTN_KV_DP_PARTS", parts),
        ]);
        let run = race::check(
            &caps,
            &sw,
            &Problem::AttnBackward(p.clone()),
            &[Schedule::Forward],
        )
        .unwrap_or_else(|e| panic!("wg2a, {parts} parts: {e}"));
        let Output::AttnBackward(g) = run.output else {
            panic!("wg2a, {parts} parts: no gradients")
        };
        [
            rel_max("dq", &g.dq, &want.dq),
            rel_max("dk", &g.dk, &want.dk),
        ]
    };
    let (two, three) = (errors("2"), errors("3"));
    for (i, name) in ["dq", "dk"].iter().enumerate() {
        eprintln!("{name}: two parts {:e}, three parts {:e}", two[i], three[i]);
        assert!(
            three[i] * 4.0 <= two[i],
            "qsa_attn_kvwg2a3_dq_bwd_bf16 {name}: relative max error {:e} with dO in three parts, \
             not under a quarter of wg2a's {:e} with two: the third part is lost or misplaced \
             (kwg_split's in-place lo2, kwg_ss_lo2's descriptor)",
            three[i],
            two[i]
        );
    }
}

/// Query ranges (`QSA_ATTN_KV_QCHUNK`, kwg_bwd's qchunk) on wg2a3: one CTA per (batch, KV head,
/// range of 64 tokens, block), dK / dV summed over the ranges with atomics into the zero-filled
/// dk / dv. Against FP64 under both schedules: a range decoded to the wrong (batch, head,
/// tokens), a query counted in two ranges or in none, a missing zero fill (the emulator's fresh
/// memory is not zero) or a dK / dV sum lost between ranges misses the gate. Cases: 300 tokens
/// of group 1 (five ranges; under causal_edge block 0's first range holds one tile), and two
/// batches x two KV heads with kv_len 330 over 100 queries (two ranges, the causal shift 230,
/// a partial last block).
#[test]
fn query_ranges_match_fp64_with_one_warp_at_a_time() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let two = g1_two_chunks(&m);
    let shifted = emu_g4_as(
        &m,
        "attn_emu_g4 as 2 x 2 heads, 100 of 330",
        Some([2, 100, 330, 16, 2, 3]),
    );
    let kernel = "qsa_attn_kvwg2a3_dq_bwd_bf16";
    for (c, dist) in [(&two, "causal_edge"), (&shifted, "repeat_ids")] {
        let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
        let want = attn_backward_f64(&p).unwrap();
        let what = format!("{}/{dist} {kernel} with 64-token query ranges", c.name);
        let sw = switches(&[
            ("QSA_ATTN_BWD", "kvdq"),
            ("QSA_ATTN_KV_MMA", "wg2a"),
            ("QSA_ATTN_KV_DP_PARTS", "3"),
            ("QSA_ATTN_KV_QCHUNK", "64"),
        ]);
        within_gate(
            &caps,
            &sw,
            &p,
            &want,
            kernel,
            &what,
            " (kwg_bwd's range decode, kv_collect's end, the dK / dV atomics, or the plan's zero \
             fill)",
        );
    }
}

/// `p`'s backward under `sw` on the emulated `caps`, forward and wave-first: `kernel` launched,
/// dq / dk / dv within the `mma` gate of FP64's `want` (`hint`: where to look, after a miss).
fn within_gate(
    caps: &qsa::dispatch::TargetCaps,
    sw: &qsa::dispatch::Switches,
    p: &qsa::problem::AttnProblem,
    want: &qsa::reference::attention::AttnBackwardF64,
    kernel: &str,
    what: &str,
    hint: &str,
) {
    let run = race::check(
        caps,
        sw,
        &Problem::AttnBackward(p.clone()),
        &[Schedule::Forward, Schedule::WaveFirst],
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        run.records.iter().any(|r| r.kernel == kernel),
        "{what}: not launched; launched {:?}",
        run.records.iter().map(|r| &r.kernel).collect::<Vec<_>>()
    );
    let Output::AttnBackward(g) = run.output else {
        panic!("{what}: no gradients")
    };
    for (name, got, want) in [
        ("dq", &g.dq, &want.dq),
        ("dk", &g.dk, &want.dk),
        ("dv", &g.dv, &want.dv),
    ] {
        let e = rel_max(name, got, want);
        assert!(
            e <= MMA_LIMIT,
            "{what} {name}: relative max error {e:e} past {MMA_LIMIT:e}{hint}"
        );
    }
}

/// dO given as bf16 (`do_dtype: bf16`): the fused wg2a form reads it natively
/// (`qsa_attn_kvwg2ab_dq_bwd_bf16`: dO copied straight into wgmma's operand, one dP product, no
/// split, one warpgroup barrier fewer per tile, D by `qsa_attn_bwd_delta_do16`), with and
/// without query ranges; every other backward widens it first (`qsa_attn_do_widen`, here before
/// the split kernel kv16s). Against FP64 of the same bf16 dO, under both schedules: a dO row
/// copied to the wrong place, a barrier short in the catch-up count (group 1 over 300 tokens,
/// causal_edge: warpgroup 1 idle in a chunk), a delta reading bf16 as f32 or a skipped
/// widening misses the gate or fails the emulator's checks.
#[test]
fn bf16_do_matches_fp64_with_one_warp_at_a_time() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let bf16_do = |mut c: Case| {
        c.attention.as_mut().unwrap().do_dtype = qsa::problem::GradDtype::Bf16;
        c
    };
    let base = bf16_do(emu_g4_as(&m, "attn_emu_g4", None));
    let g16 = bf16_do(g16_40_tokens(&m));
    let two = bf16_do(g1_two_chunks(&m));
    let fused = [("QSA_ATTN_BWD", "kvdq"), ("QSA_ATTN_KV_MMA", "wg2a")];
    let ranged = [
        ("QSA_ATTN_BWD", "kvdq"),
        ("QSA_ATTN_KV_MMA", "wg2a"),
        ("QSA_ATTN_KV_QCHUNK", "64"),
    ];
    let split = [("QSA_ATTN_BWD", "kvdq"), ("QSA_ATTN_KV_MMA", "bf16s")];
    for (c, dist, sw, kernel) in [
        (
            &base,
            "random_ids",
            &fused[..],
            "qsa_attn_kvwg2ab_dq_bwd_bf16",
        ),
        (
            &g16,
            "causal_edge",
            &fused[..],
            "qsa_attn_kvwg2ab_dq_bwd_bf16",
        ),
        (
            &two,
            "causal_edge",
            &fused[..],
            "qsa_attn_kvwg2ab_dq_bwd_bf16",
        ),
        (
            &two,
            "causal_edge",
            &ranged[..],
            "qsa_attn_kvwg2ab_dq_bwd_bf16",
        ),
        (&g16, "random_ids", &split[..], "qsa_attn_do_widen"),
    ] {
        let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
        assert!(
            p.d_o
                .iter()
                .all(|x| half::bf16::from_f32(*x).to_f32() == *x)
                && p.d_o.iter().any(|x| *x != 0.0),
            "{}: dO is not bf16 values, or all zero",
            c.name
        );
        let want = attn_backward_f64(&p).unwrap();
        let what = format!("{}/{dist} {kernel} {sw:?}, dO bf16", c.name);
        within_gate(
            &caps,
            &switches(sw),
            &p,
            &want,
            kernel,
            &what,
            " (kwg_issue's DO16 copy, the DO16 barrier count, the delta's or the widening's dO)",
        );
    }
}

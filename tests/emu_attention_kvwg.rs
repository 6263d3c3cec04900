//! The wgmma backward (`QSA_ATTN_KV_MMA=wg` / `wgp` / `wg2` / `wg2a`: kernels/common/attention_kv_wg.h) on the
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
use qsa::problem::{Output, Problem};
use qsa::reference::attention::attn_backward_f64;

/// matrix.yaml's gates.error_limits.attention.mma.limit.
const MMA_LIMIT: f64 = 5e-5;

#[test]
fn wgmma_backward_matches_fp64_with_one_warp_at_a_time() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let base = m.cases.iter().find(|c| c.name == "attn_emu_g4").unwrap();
    let mut g16 = base.clone();
    g16.name = "attn_emu_g4 as g16, 40 tokens".into();
    let shape = g16.attention.as_mut().unwrap();
    (shape.q_len, shape.kv_len, shape.hq, shape.hkv, shape.t) = (40, 200, 16, 1, 2);
    // examples/cases/attn-kv16-forms.yaml's attn_kvf_g1_two_chunks (same name, same ids): block
    // 0 scans two chunks of 256 tokens; under causal_edge its first holds 64 (one tile: wg2's
    // warpgroup 0 takes it, warpgroup 1 none), where racecheck reported wg2's hazard (session
    // 11 call C) and the emulator's barrier-balance check fails without wg2's catch-up barriers.
    let mut two = base.clone();
    two.name = "attn_kvf_g1_two_chunks".into();
    let shape = two.attention.as_mut().unwrap();
    (shape.q_len, shape.kv_len, shape.hq, shape.hkv, shape.t) = (300, 300, 1, 1, 1);
    for (c, dist) in [
        (base, "random_ids"),
        (&g16, "causal_edge"),
        (&two, "causal_edge"),
    ] {
        let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
        let want = attn_backward_f64(&p).unwrap();
        for (mma, kernel) in [
            ("wg", "qsa_attn_kvwg_dq_bwd_bf16"),
            ("wgp", "qsa_attn_kvwgp_dq_bwd_bf16"),
            ("wg2", "qsa_attn_kvwg2_dq_bwd_bf16"),
            ("wg2a", "qsa_attn_kvwg2a_dq_bwd_bf16"),
        ] {
            let what = format!("{}/{dist} {kernel}", c.name);
            let sw = switches(&[("QSA_ATTN_BWD", "kvdq"), ("QSA_ATTN_KV_MMA", mma)]);
            let run = race::check(
                &caps,
                &sw,
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
                    "{what} {name}: relative max error {e:e} past {MMA_LIMIT:e}"
                );
            }
        }
    }
}

//! Tests of the selection-attention dispatch: the staged plan's geometry, shared bytes and
//! splits, the backward's default and its forced paths. `caps` is shared with the other
//! attention dispatch tests.
use super::*;
use crate::dispatch::Vendor;

/// The bench's prefill backward shape (1,024 selections per KV block).
const PREFILL: BwdShape = BwdShape {
    q_len: 16384,
    kv_len: 16384,
    t: 16,
};

pub(crate) fn caps(name: &str, shared_kib: u32, sms: u32) -> TargetCaps {
    TargetCaps {
        name: name.into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: shared_kib * 1024,
        multiprocessors: sms,
        features: vec![],
    }
}

#[test]
fn geometry_fills_sixteen_rows_with_divisors_of_the_group() {
    assert_eq!(staged_geometry(16, 100), (16, 1));
    assert_eq!(staged_geometry(8, 100), (8, 2));
    assert_eq!(staged_geometry(4, 3), (4, 3));
    assert_eq!(staged_geometry(32, 5), (16, 1));
    assert_eq!(staged_geometry(6, 10), (6, 2));
    assert_eq!(staged_geometry(1, 40), (1, 16));
}

#[test]
fn shared_bytes_match_the_kernel_layout() {
    // q 8448 + s 4352 + row state 192 + list 4 * 16 * 4 + 4 = 13252 -> 13264, + 34816 / buffer.
    assert_eq!(staged_shared_bytes(16, 1, false), 13_264 + 34_816);
    assert_eq!(staged_shared_bytes(16, 2, false), 13_264 + 2 * 34_816);
}

#[test]
fn decode_splits_and_prefill_does_not() {
    let h200 = caps("sm_90", 227, 132);
    let d = staged_plan(&h200, 1, 1, 128, 8, 16, false).unwrap();
    assert_eq!((d.items, d.nsplit), (8, 16));
    // 128 items want ceil(528 / 128) = 5 splits of 16 blocks: evened out to 4 x 4.
    let d16 = staged_plan(&h200, 1, 16, 128, 8, 16, false).unwrap();
    assert_eq!((d16.items, d16.nsplit), (128, 4));
    // Group 8: two tokens per CTA, up to 32 blocks; 64 items want 9 -> 8 x 4.
    let d8 = staged_plan(&h200, 1, 16, 64, 8, 16, false).unwrap();
    assert_eq!((d8.items, d8.nsplit), (64, 8));
    let p = staged_plan(&h200, 4, 16384, 64, 4, 16, false).unwrap();
    assert_eq!((p.items, p.nsplit, p.nbuf), (262_144, 1, 1));
    let b = staged_plan(&h200, 1, 1, 128, 8, 16, true).unwrap();
    assert_eq!(b.nsplit, 1);
}

#[test]
fn fused_bf16_backward_by_default_on_sm90_atomics_elsewhere_kv_forced_where_built() {
    // choose_backward's comment: the fused bf16 kernel is the default for bf16 inputs on
    // sm_90+ (68.2 ms against the atomics' 158.5 on the H200); f16 inputs and older
    // targets keep the atomics.
    let none = Switches::default();
    let bf16 = AttnDtype::Bf16;
    let mut h200 = caps("sm_90", 227, 132);
    h200.features = vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Clusters];
    // The bench's prefill (1,024 selections per block) and decode (16 queries over 262K
    // keys: 0.06 per block, measured slower fused: BwdShape's comment) shapes.
    let decode = BwdShape {
        q_len: 16,
        kv_len: 262_144,
        t: 16,
    };
    assert_eq!(
        choose_backward(&h200, &none, bf16, decode).unwrap(),
        BwdPath::Atomic,
        "decode shapes keep the atomics (the fused kernel's CTAs scan blocks nobody selected)"
    );
    let one_per_block = BwdShape {
        q_len: 16,
        kv_len: 16 * 16 * 64,
        t: 16,
    };
    assert_eq!(
        choose_backward(&h200, &none, bf16, one_per_block).unwrap(),
        BwdPath::KvFused,
        "one selection per block is the line"
    );
    assert_eq!(
        choose_backward(
            &h200,
            &none,
            bf16,
            BwdShape {
                kv_len: one_per_block.kv_len + 1,
                ..one_per_block
            }
        )
        .unwrap(),
        BwdPath::Atomic,
        "one block more than selections: atomics"
    );
    assert_eq!(
        choose_backward(&h200, &none, bf16, PREFILL).unwrap(),
        BwdPath::KvFused
    );
    assert_eq!(
        kv_products(&h200, &none, bf16, PREFILL).unwrap().stem(),
        "kv16s",
        "the default path's products: bf16, dO split once per tile"
    );
    assert_eq!(
        choose_backward(&h200, &none, AttnDtype::F16, PREFILL).unwrap(),
        BwdPath::Atomic,
        "f16 inputs keep the atomics (the kv16 kernels are bf16 only)"
    );
    let mut sm86 = caps("sm_86", 99, 84);
    sm86.features = vec![Feature::Tf32Tc, Feature::Bf16Tc];
    assert_eq!(
        choose_backward(&sm86, &none, bf16, PREFILL).unwrap(),
        BwdPath::Atomic,
        "before sm_90 (no qsa_attn_kv16*) the atomics stay"
    );
    let kv = Switches::from_pairs(&[("QSA_ATTN_BWD", "kvdq")]);
    assert_eq!(
        kv_products(&h200, &kv, bf16, PREFILL).unwrap().stem(),
        "kv",
        "a forced path keeps tf32 products unless QSA_ATTN_KV_MMA says otherwise"
    );
    let sm75 = caps("sm_75", 64, 68);
    assert_eq!(
        choose_backward(&sm75, &none, bf16, PREFILL).unwrap(),
        BwdPath::Atomic
    );
    let mut gfx950 = caps("gfx950", 160, 256);
    gfx950.vendor = Vendor::Amd;
    gfx950.features = vec![Feature::Bf16Tc];
    assert_eq!(
        choose_backward(&gfx950, &none, bf16, PREFILL).unwrap(),
        BwdPath::Atomic
    );
    let sw = |v: &str| Switches::from_pairs(&[("QSA_ATTN_BWD", v)]);
    assert_eq!(
        choose_backward(&h200, &sw("atomic"), bf16, PREFILL).unwrap(),
        BwdPath::Atomic
    );
    assert_eq!(
        choose_backward(&h200, &sw("kv"), bf16, PREFILL).unwrap(),
        BwdPath::KvMajor
    );
    assert_eq!(
        choose_backward(&sm75, &sw("kv"), bf16, PREFILL).unwrap(),
        BwdPath::Atomic,
        "a forced kv falls back where the kernel is not built"
    );
    assert_eq!(
        choose_backward(&gfx950, &sw("kv"), bf16, PREFILL).unwrap(),
        BwdPath::Atomic,
        "a forced kv falls back on AMD, whose build has no qsa_attn_kv_bwd_* (LDS and a \
         bf16 feature do not make it exist)"
    );
    let e = choose_backward(&h200, &sw("yes"), bf16, PREFILL)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected atomic, kv or kvdq"), "{e}");
    assert_eq!(
        choose_backward(&h200, &sw("kvdq"), bf16, PREFILL).unwrap(),
        BwdPath::KvFused
    );
    assert_eq!(
        choose_backward(&sm75, &sw("kvdq"), bf16, PREFILL).unwrap(),
        BwdPath::Atomic,
        "a forced kvdq falls back where the kernel is not built"
    );
}

#[test]
fn kv_products_bf16_only_for_bf16_inputs_on_sm90() {
    let sw = |kv: &[(&str, &str)]| Switches::from_pairs(kv);
    let mut h200 = caps("sm_90", 227, 132);
    h200.features = vec![Feature::Bf16Tc, Feature::Clusters];
    let products = |kv: &[(&str, &str)], dtype| kv_products(&h200, &sw(kv), dtype, PREFILL);
    let tf32 = KvProducts {
        bf16: false,
        split: false,
        dp_parts: 3,
        ps_parts: 2,
        nc: false,
        wg: 0,
    };
    assert_eq!(
        products(&[("QSA_ATTN_BWD", "kv")], AttnDtype::Bf16).unwrap(),
        tf32
    );
    assert_eq!(products(&[], AttnDtype::F16).unwrap(), tf32);
    let bf16_dp2 = [("QSA_ATTN_KV_MMA", "bf16"), ("QSA_ATTN_KV_DP_PARTS", "2")];
    let b = products(&bf16_dp2, AttnDtype::Bf16).unwrap();
    assert_eq!(
        (b.bf16, b.split, b.dp_parts, b.stem()),
        (true, false, 2, "kv16")
    );
    let f = products(&bf16_dp2, AttnDtype::F16).unwrap();
    assert_eq!(
        (f, f.stem()),
        (tf32, "kv"),
        "f16 inputs keep the tf32 kernel whole: no qsa_attn_kv16*_f16 is built"
    );
    let mut sm86 = caps("sm_86", 99, 84);
    sm86.features = vec![Feature::Bf16Tc];
    assert_eq!(
        kv_products(&sm86, &sw(&bf16_dp2), AttnDtype::Bf16, PREFILL).unwrap(),
        tf32,
        "before sm_90 the tf32 kernel runs: no qsa_attn_kv16* is built there"
    );
    let split = [("QSA_ATTN_KV_MMA", "bf16s")];
    assert_eq!(products(&split, AttnDtype::Bf16).unwrap().stem(), "kv16s");
    assert_eq!(products(&split, AttnDtype::F16).unwrap(), tf32);
    let refused = |kv: &[(&str, &str)], want: &str| {
        let e = products(kv, AttnDtype::Bf16).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    };
    let split_dp2 = [("QSA_ATTN_KV_MMA", "bf16s"), ("QSA_ATTN_KV_DP_PARTS", "2")];
    assert_eq!(
        products(&split_dp2, AttnDtype::Bf16).unwrap().stem(),
        "kv16sp2",
        "the split kernel's two-part dO form (attention_kv.rs)"
    );
    refused(
        &[("QSA_ATTN_BWD", "kv"), ("QSA_ATTN_KV_DP_PARTS", "2")],
        "needs QSA_ATTN_KV_MMA=bf16",
    );
    refused(
        &[("QSA_ATTN_KV_MMA", "fp8")],
        "QSA_ATTN_KV_MMA=fp8: expected tf32, bf16, bf16s, wg, wgp, wg2 or wg2a",
    );
    refused(
        &[("QSA_ATTN_KV_DP_PARTS", "1")],
        "QSA_ATTN_KV_DP_PARTS=1: expected 2 or 3",
    );
}

#[test]
fn kv_backward_shared_bytes_match_the_kernel_layout() {
    // K, V 2 x 17408 + 2 x (q 4352 + dO 8448 + 3 x 64) + P, dP 2 x 4352 + (256 + 8) x 4,
    // then dO's three bf16 parts 3 x 4352 (the split kernel); selection_attention.cu's
    // qsa:dynamic_shared figures.
    let kv = |bf16, split| KvProducts {
        bf16,
        split,
        ..KvProducts::KV16S
    };
    assert_eq!(kv_bwd_shared_bytes(kv(false, false), true), 70_560);
    assert_eq!(kv_bwd_shared_bytes(kv(true, false), false), 70_560);
    // + dS hi / lo 2 x 16 x 72 x 2 (the fused bf16 kernel).
    assert_eq!(kv_bwd_shared_bytes(kv(true, false), true), 75_168);
    assert_eq!(kv_bwd_shared_bytes(kv(true, true), false), 83_616);
    assert_eq!(kv_bwd_shared_bytes(kv(true, true), true), 88_224);
    // The conflict-free form: P / dP rows at 76 floats, + 2 x 16 x 8 x 4.
    let nc = KvProducts {
        nc: true,
        ..KvProducts::KV16S
    };
    assert_eq!(kv_bwd_shared_bytes(nc, true), 89_248);
    assert_eq!(kv_bwd_shared_max(), 89_248);
}

#[test]
fn too_many_ids_for_the_shared_budget_is_a_shape_error() {
    let gfx906 = caps("gfx906", 64, 60);
    assert!(staged_plan(&gfx906, 1, 4, 16, 4, 16, false).is_ok());
    let e = staged_plan(&gfx906, 1, 64, 4, 4, 2048, false).unwrap_err();
    assert!(e.to_string().contains("at most t ="), "{e}");
}

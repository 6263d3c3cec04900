//! Decode dispatch tests: the plans the H200 and the other targets get, and every sweep
//! switch with its refusals.
use super::*;

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

fn none_sw() -> Switches {
    Switches::default()
}

fn sw(pairs: &[(&str, &str)]) -> Switches {
    Switches::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn h200_decode_shapes_take_the_decode_kernel() {
    let h200 = caps("sm_90", 232_448, 132, true);
    let none = Switches::default();
    // 16 queries x 8 KV heads, group 16: 128 items, one CTA each, 8 warps x 2 stages.
    let p = decode_plan(&h200, &none, 1, 16, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!((p.items, p.nsplit, p.warps, p.stages), (128, 1, 8, 2));
    assert_eq!(p.shared, 139_264);
    assert_eq!(dispatch_name(&p), "decode");
    // One query: 8 items, 8 splits of two blocks (8 units over 8 warps, so a one-stage
    // ring), merged in-kernel.
    let p = decode_plan(&h200, &none, 1, 1, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!((p.items, p.nsplit, p.merge), (8, 8, DecMerge::Kernel));
    assert_eq!((p.stages, p.shared), (1, 69_632));
    assert_eq!(dispatch_name(&p), "decode_split");
    // Up to MAX_ITEMS_PER_SM (6) items per SM (792 on 132 SMs: 99 queries x 8 KV heads)
    // take the decode kernel, one item more the staged (measured crossover ~7.5).
    assert!(decode_plan(&h200, &none, 1, 99, 128, 8, 16, false)
        .unwrap()
        .is_some());
    assert!(decode_plan(&h200, &none, 1, 100, 128, 8, 16, false)
        .unwrap()
        .is_none());
    // Prefill and the backward keep the staged kernel.
    assert!(decode_plan(&h200, &none, 4, 16384, 64, 4, 16, false)
        .unwrap()
        .is_none());
    assert!(decode_plan(&h200, &none, 1, 16, 128, 8, 16, true)
        .unwrap()
        .is_none());
    // More ids than lanes: staged.
    assert!(decode_plan(&h200, &none, 1, 16, 128, 8, 33, false)
        .unwrap()
        .is_none());
}

#[test]
fn only_tensor_core_nvidia_targets_build_it() {
    let none = Switches::default();
    let sm75 = caps("sm_75", 65_536, 68, false);
    assert!(decode_plan(&sm75, &none, 1, 1, 128, 8, 16, false)
        .unwrap()
        .is_none());
    let forced = sw(&[("QSA_ATTN_KERNEL", "decode")]);
    assert!(decode_plan(&sm75, &forced, 1, 1, 128, 8, 16, false)
        .unwrap()
        .is_none());
    let mut gfx950 = caps("gfx950", 163_840, 256, true);
    gfx950.vendor = Vendor::Amd;
    assert!(decode_plan(&gfx950, &none, 1, 1, 128, 8, 16, false)
        .unwrap()
        .is_none());
    // sm_86's 99 KiB: one stage of eight warps.
    let sm86 = caps("sm_86", 101_376, 82, true);
    let p = decode_plan(&sm86, &none, 1, 16, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!((p.warps, p.stages, p.shared), (8, 1, 69_632));
}

#[test]
fn switches_sweep_and_bad_values_are_named() {
    let h200 = caps("sm_90", 232_448, 132, true);
    let s = sw(&[
        ("QSA_ATTN_DEC_WARPS", "8"),
        ("QSA_ATTN_DEC_STAGES", "3"),
        ("QSA_ATTN_DEC_SPLITS", "2"),
        ("QSA_ATTN_DEC_MERGE", "launch"),
    ]);
    let p = decode_plan(&h200, &s, 1, 16, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.warps, p.stages, p.nsplit, p.merge),
        (8, 3, 2, DecMerge::Launch)
    );
    assert_eq!(dispatch_name(&p), "decode_combine");
    assert!(!p.pair);
    // Pairs of units: at least two stages.
    let pr = sw(&[("QSA_ATTN_DEC_PAIR", "1"), ("QSA_ATTN_DEC_STAGES", "1")]);
    let p = decode_plan(&h200, &pr, 1, 1, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert!(p.pair);
    assert_eq!(p.stages, 2);
    let staged = sw(&[("QSA_ATTN_KERNEL", "staged")]);
    assert!(decode_plan(&h200, &staged, 1, 1, 128, 8, 16, false)
        .unwrap()
        .is_none());
    let e = decode_plan(
        &h200,
        &sw(&[("QSA_ATTN_DEC_MERGE", "x")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("expected kernel, launch, cluster or push"),
        "{e}"
    );
    // The cluster merge: sm_90 only (else the ticket merge), eight splits, the CTA result
    // after the warps' areas (8 x 8320 + 8256 bytes, over a one-stage ring of 69632).
    let cl = sw(&[("QSA_ATTN_DEC_MERGE", "cluster")]);
    let mut h200c = h200.clone();
    h200c.features.push(Feature::Clusters);
    let p = decode_plan(&h200c, &cl, 1, 1, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.merge, p.nsplit, p.stages, p.shared),
        (DecMerge::Cluster, 8, 1, 74_816)
    );
    assert_eq!(dispatch_name(&p), "decode_cluster");
    let p = decode_plan(&h200, &cl, 1, 1, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!(p.merge, DecMerge::Kernel, "no clusters: the ticket merge");
    let bad = sw(&[
        ("QSA_ATTN_DEC_MERGE", "cluster"),
        ("QSA_ATTN_DEC_SPLITS", "4"),
    ]);
    let e = decode_plan(&h200c, &bad, 1, 1, 128, 8, 16, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("runs 8 splits"), "{e}");
    let e = decode_plan(
        &h200,
        &sw(&[("QSA_ATTN_DEC_WARPS", "0")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("from 1 to 8"), "{e}");
    let many = sw(&[("QSA_ATTN_DEC_SPLITS", "129")]);
    let p = decode_plan(&h200, &many, 1, 1, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        p.merge,
        DecMerge::Launch,
        "past the merge table: a second launch"
    );
    let forced = sw(&[
        ("QSA_ATTN_DEC_SPLITS", "129"),
        ("QSA_ATTN_DEC_MERGE", "kernel"),
    ]);
    let e = decode_plan(&h200, &forced, 1, 1, 128, 8, 16, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("at most 128 splits"), "{e}");
    // Probes: opts (the kernel's DEC_PROBE_*); pairs pick their own bf16 kernel.
    let p = decode_plan(&h200, &none_sw(), 1, 1, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!((p.probe, p.opts()), (None, 0));
    assert_eq!(p.kernel("bf16"), "qsa_attn_dec_fwd_bf16");
    for (v, probe, opts) in [
        ("launch", DecProbe::Launch, 1),
        ("no_kv", DecProbe::NoKv, 2),
        ("no_math", DecProbe::NoMath, 3),
    ] {
        let s = sw(&[("QSA_ATTN_DEC_PROBE", v), ("QSA_ATTN_DEC_PAIR", "1")]);
        let p = decode_plan(&h200, &s, 1, 1, 128, 8, 16, false)
            .unwrap()
            .unwrap();
        assert_eq!((p.probe, p.opts()), (Some(probe), opts), "{v}");
        assert_eq!(p.kernel("bf16"), "qsa_attn_dec_fwd_pair_bf16");
        assert_eq!(
            p.kernel("f16"),
            "qsa_attn_dec_fwd_f16",
            "f16 has no pair kernel"
        );
    }
    let e = decode_plan(
        &h200,
        &sw(&[("QSA_ATTN_DEC_PROBE", "fast")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("expected launch, no_kv, no_math, list or loop"),
        "{e}"
    );
    // The push merge: the cluster kernel with opts bit 4, its inbox past the ring and the
    // merge areas (8 warps x 1 stage: max(69632, 66560) + 8256 bytes).
    let p = decode_plan(
        &h200c,
        &sw(&[("QSA_ATTN_DEC_MERGE", "push")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (p.merge, p.nsplit, p.stages, p.shared),
        (DecMerge::Push, 8, 1, 77_888)
    );
    assert_eq!((p.opts(), dispatch_name(&p)), (16, "decode_push"));
    assert_eq!(p.kernel("bf16"), "qsa_attn_dec_cl_fwd_bf16");
    let p = decode_plan(
        &h200,
        &sw(&[("QSA_ATTN_DEC_MERGE", "push")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(p.merge, DecMerge::Kernel, "no clusters: the ticket merge");
    let e = decode_plan(
        &h200c,
        &sw(&[("QSA_ATTN_DEC_MERGE", "push"), ("QSA_ATTN_DEC_SPLITS", "2")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("QSA_ATTN_DEC_MERGE=push runs 8 splits"), "{e}");
    // The L2 prefetch bit and the chain probes combine with the rest of opts.
    let s = sw(&[
        ("QSA_ATTN_DEC_PREFETCH", "256"),
        ("QSA_ATTN_DEC_PROBE", "loop"),
    ]);
    let p = decode_plan(&h200, &s, 1, 16, 128, 8, 16, false)
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.l2_256, p.probe, p.opts()),
        (true, Some(DecProbe::Loop), 8 | 5)
    );
    let p = decode_plan(
        &h200c,
        &sw(&[
            ("QSA_ATTN_DEC_PROBE", "list"),
            ("QSA_ATTN_DEC_MERGE", "push"),
        ]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap()
    .unwrap();
    assert_eq!(p.opts(), 16 | 4);
    let e = decode_plan(
        &h200,
        &sw(&[("QSA_ATTN_DEC_PREFETCH", "128")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("QSA_ATTN_DEC_PREFETCH=128: expected none or 256"),
        "{e}"
    );
    let sm86 = caps("sm_86", 101_376, 82, true);
    let e = decode_plan(
        &sm86,
        &sw(&[("QSA_ATTN_DEC_STAGES", "4")]),
        1,
        1,
        128,
        8,
        16,
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("allows 101376"), "{e}");
}

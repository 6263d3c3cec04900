use super::*;
use crate::dispatch::Feature;

fn nvidia(features: Vec<Feature>) -> TargetCaps {
    TargetCaps {
        name: "sm_test".into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: 232_448,
        multiprocessors: 132,
        features,
    }
}

/// The switches of a matrix variant that forces `kernel`.
fn forced(kernel: &str) -> Switches {
    Switches::from_pairs(&[("QSA_TOPK_KERNEL", kernel)])
}

fn decode(nq: usize, n: usize) -> TopkShape {
    TopkShape {
        nq,
        n,
        k: 2048,
        has_active: false,
    }
}

#[test]
fn the_engines_dispatch_never_takes_the_cluster_kernel() {
    // Measured slower than the split on the H200 (docs/results/topk-cluster-2026-12-01/):
    // decode takes the speculative kernel there, the split on other NVIDIA targets.
    let sw = Switches::default();
    let hopper = nvidia(vec![Feature::Clusters]);
    let pick = |s| choose(&hopper, &sw, s).unwrap();
    assert_eq!(pick(decode(16, 262_144)), TopkKernel::Spec);
    assert_eq!(pick(decode(1, CLUSTER_MAX_N)), TopkKernel::Spec);
    assert_eq!(pick(decode(17, 262_144)), TopkKernel::Wide);
    assert_eq!(pick(decode(1, REGISTER_MAX_N)), TopkKernel::Register);
    let ampere = nvidia(vec![]);
    assert_eq!(
        choose(&ampere, &sw, decode(16, 262_144)).unwrap(),
        TopkKernel::Split
    );
}

#[test]
fn a_forced_spec_kernel_takes_decode_only() {
    let sw = forced("spec");
    let ampere = nvidia(vec![]);
    assert_eq!(
        choose(&ampere, &sw, decode(3, 40_000)).unwrap(),
        TopkKernel::Spec
    );
    let prefill = TopkShape {
        has_active: true,
        ..decode(3, 40_000)
    };
    assert_eq!(choose(&ampere, &sw, prefill).unwrap(), TopkKernel::Wide);
}

fn switches(pairs: &[(&str, &str)]) -> Switches {
    Switches::from_pairs(pairs)
}

#[test]
fn spec_options_default_to_the_measured_kernel() {
    let hopper = nvidia(vec![Feature::Clusters]);
    let o = spec_options(&hopper, &Switches::default(), decode(1, 262_144)).unwrap();
    assert_eq!(o.chunk, SpecChunk::K4);
    assert_eq!(
        (o.kernel(), o.flags()),
        ("qsa_topk_spec_float", 63),
        "sm_90's default: the float step with every flag (floatX, measured fastest on the H200)"
    );
    // Before sm_90 (not measured with the float step) the lean step's flags stay.
    let ampere = nvidia(vec![]);
    let o = spec_options(&ampere, &Switches::default(), decode(1, 262_144)).unwrap();
    assert_eq!(
        (o.kernel(), o.flags()),
        ("qsa_topk_spec_lean", 1 | 2 | 4),
        "every session-7 QSA_TOPK_SPEC_* flag on by default before sm_90"
    );
    let off = switches(&[
        ("QSA_TOPK_SPEC_FINAL", "byte"),
        ("QSA_TOPK_SPEC_BOUND", "radix"),
        ("QSA_TOPK_SPEC_LOAD", "scalar"),
    ]);
    let o = spec_options(&hopper, &off, decode(1, 262_144)).unwrap();
    assert_eq!(o.flags(), 0, "each flag's off value turns it off");
    let amd = TargetCaps {
        vendor: Vendor::Amd,
        ..nvidia(vec![])
    };
    let o = spec_options(&amd, &Switches::default(), decode(16, 262_144)).unwrap();
    assert_eq!(
        (o.chunk, o.flags()),
        (SpecChunk::K4, 0),
        "AMD: the plain form, the only one built for HIP"
    );
}

#[test]
fn spec_options_follow_their_switches() {
    let hopper = nvidia(vec![Feature::Clusters]);
    let o = spec_options(
        &hopper,
        &switches(&[
            ("QSA_TOPK_SPEC_CHUNK", "16384"),
            ("QSA_TOPK_SPEC_BOUND", "radix"),
        ]),
        decode(1, 262_144),
    )
    .unwrap();
    assert_eq!(
        (o.chunk.entries(), o.kernel()),
        (16_384, "qsa_topk_spec_16k")
    );
    assert_eq!(
        o.flags(),
        1 | 4,
        "final window (1) and vec4 (4) by default, bound radix (no 2)"
    );
    let lean = |chunk| {
        spec_options(
            &hopper,
            &switches(&[
                ("QSA_TOPK_SPEC_CHUNK", chunk),
                ("QSA_TOPK_SPEC_KEEP", "lean"),
            ]),
            decode(1, 262_144),
        )
    };
    assert_eq!(lean("4096").unwrap().kernel(), "qsa_topk_spec_lean");
    assert_eq!(lean("8192").unwrap().kernel(), "qsa_topk_spec_8k_lean");
    let e = lean("16384").unwrap_err().to_string();
    assert!(e.contains("for chunks of 2048, 4096 and 8192 only"), "{e}");
    let o = spec_options(
        &hopper,
        &switches(&[
            ("QSA_TOPK_SPEC_FINAL", "byte"),
            ("QSA_TOPK_SPEC_LOAD", "scalar"),
        ]),
        decode(1, 9000),
    )
    .unwrap();
    assert_eq!(o.flags(), 2);
}

/// Session 8's forms: each sets its flag bit and takes the entry point that has it
/// compiled in; a pair with no such entry point is refused, naming the fix.
#[test]
fn session_8_forms_take_their_entry_points() {
    let hopper = nvidia(vec![Feature::Clusters]);
    let opts = |pairs: &[(&str, &str)]| spec_options(&hopper, &switches(pairs), decode(1, 262_144));
    let o = opts(&[("QSA_TOPK_SPEC_FENCE", "one")]).unwrap();
    assert_eq!(
        (o.kernel(), o.flags(), o.threads()),
        ("qsa_topk_spec_x", 7 | 8, 512)
    );
    // tmax with the step unset: the lean step (the engine's), which has tmax compiled in.
    let o = opts(&[
        ("QSA_TOPK_SPEC_BOUND", "tmax"),
        ("QSA_TOPK_SPEC_CHUNK", "8192"),
    ])
    .unwrap();
    assert_eq!((o.kernel(), o.flags()), ("qsa_topk_spec_8k_lean_x", 7 | 16));
    let o = opts(&[
        ("QSA_TOPK_SPEC_BOUND", "tmax"),
        ("QSA_TOPK_SPEC_CHUNK", "8192"),
        ("QSA_TOPK_SPEC_KEEP", "general"),
    ])
    .unwrap();
    assert_eq!((o.kernel(), o.flags()), ("qsa_topk_spec_8k_x", 7 | 16));
    let o = opts(&[("QSA_TOPK_SPEC_FINAL", "window_lean")]).unwrap();
    assert_eq!((o.kernel(), o.flags()), ("qsa_topk_spec_x", 7 | 32));
    let o = opts(&[("QSA_TOPK_SPEC_THREADS", "1024")]).unwrap();
    assert_eq!(
        (o.kernel(), o.chunk, o.flags(), o.threads()),
        ("qsa_topk_spec_t1024", SpecChunk::K8, 7, 1024)
    );
    let o = opts(&[
        ("QSA_TOPK_SPEC_THREADS", "1024"),
        ("QSA_TOPK_SPEC_FENCE", "one"),
    ])
    .unwrap();
    assert_eq!((o.kernel(), o.flags()), ("qsa_topk_spec_t1024", 7 | 8));
    let o = opts(&[("QSA_TOPK_SPEC_KEEP", "float")]).unwrap();
    assert_eq!((o.kernel(), o.flags()), ("qsa_topk_spec_float", 7 | 16));
    let o = opts(&[
        ("QSA_TOPK_SPEC_KEEP", "float"),
        ("QSA_TOPK_SPEC_CHUNK", "8192"),
    ])
    .unwrap();
    assert_eq!(o.kernel(), "qsa_topk_spec_8k_float");
    for bad in [
        &[
            ("QSA_TOPK_SPEC_KEEP", "float"),
            ("QSA_TOPK_SPEC_BOUND", "window"),
        ][..],
        &[
            ("QSA_TOPK_SPEC_KEEP", "float"),
            ("QSA_TOPK_SPEC_THREADS", "1024"),
        ][..],
        &[
            ("QSA_TOPK_SPEC_KEEP", "float"),
            ("QSA_TOPK_SPEC_CHUNK", "2048"),
        ][..],
    ] {
        let e = opts(bad).unwrap_err().to_string();
        assert!(e.contains("QSA_TOPK_SPEC_KEEP=float"), "{e}");
    }
    let lean_tmax = [
        ("QSA_TOPK_SPEC_KEEP", "lean"),
        ("QSA_TOPK_SPEC_BOUND", "tmax"),
    ];
    let o = opts(&lean_tmax).unwrap();
    assert_eq!((o.kernel(), o.flags()), ("qsa_topk_spec_lean_x", 7 | 16));
    let o = opts(&[lean_tmax[0], lean_tmax[1], ("QSA_TOPK_SPEC_CHUNK", "8192")]).unwrap();
    assert_eq!(o.kernel(), "qsa_topk_spec_8k_lean_x");
    let o = opts(&[
        lean_tmax[0],
        lean_tmax[1],
        ("QSA_TOPK_SPEC_THREADS", "1024"),
    ])
    .unwrap();
    assert_eq!(
        (o.kernel(), o.threads()),
        ("qsa_topk_spec_t1024_lean_x", 1024)
    );
    let e = opts(&[
        ("QSA_TOPK_SPEC_THREADS", "1024"),
        ("QSA_TOPK_SPEC_CHUNK", "4096"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("QSA_TOPK_SPEC_THREADS=1024 exists for chunks of 8192"),
        "{e}"
    );
    let e = opts(&[
        ("QSA_TOPK_SPEC_BOUND", "tmax"),
        ("QSA_TOPK_SPEC_CHUNK", "2048"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("exist for chunks of 4096 and 8192, not 2048"),
        "{e}"
    );
    for bad in [
        &[
            ("QSA_TOPK_SPEC_FENCE", "one"),
            ("QSA_TOPK_SPEC_KEEP", "lean"),
        ][..],
        &[
            ("QSA_TOPK_SPEC_THREADS", "1024"),
            ("QSA_TOPK_SPEC_KEEP", "lean"),
        ][..],
    ] {
        let e = opts(bad).unwrap_err().to_string();
        assert!(
            e.contains("exists with QSA_TOPK_SPEC_BOUND=tmax only"),
            "{e}"
        );
    }
}

#[test]
fn the_engines_chunk_doubles_past_one_cta_per_sm_and_keeps_lean() {
    // 132 SMs. 1 x 262,144: 64 chunks of 4,096; 2 x: 128; 3 x: 192 put two CTAs on 60
    // SMs: 8,192 (measured lean 15.4 against 17.0 us at 3 x), as at 16 x (1,024).
    let hopper = nvidia(vec![Feature::Clusters]);
    let pick = |nq| {
        let o = spec_options(&hopper, &Switches::default(), decode(nq, 262_144)).unwrap();
        (o.chunk, o.kernel())
    };
    assert_eq!(
        pick(3),
        (SpecChunk::K8, "qsa_topk_spec_8k_float"),
        "3 x 262,144: 192 CTAs of 4,096 exceed one per SM, so chunks of 8,192"
    );
    assert_eq!(pick(1), (SpecChunk::K4, "qsa_topk_spec_float"));
    assert_eq!(pick(2), (SpecChunk::K4, "qsa_topk_spec_float"));
    assert_eq!(pick(16), (SpecChunk::K8, "qsa_topk_spec_8k_float"));
    // Short rows keep the lean step (call F3: the float step 2.46x slower at 3 x 40,000,
    // k = 2,048), from 32 keys per id on the float one.
    assert_eq!(
        spec_options(&hopper, &Switches::default(), decode(3, 40_000))
            .unwrap()
            .kernel(),
        "qsa_topk_spec_lean"
    );
    assert_eq!(
        spec_options(&hopper, &Switches::default(), decode(3, 65_536))
            .unwrap()
            .kernel(),
        "qsa_topk_spec_float"
    );
    // One step switch set: the engine fills in nothing else (the lean step, as forced).
    let lean = switches(&[("QSA_TOPK_SPEC_KEEP", "lean")]);
    let o = spec_options(&hopper, &lean, decode(3, 262_144)).unwrap();
    assert_eq!(o.kernel(), "qsa_topk_spec_8k_lean");
    // The general step stays one switch away; forced 16,384 has no lean form.
    let general = switches(&[("QSA_TOPK_SPEC_KEEP", "general")]);
    let o = spec_options(&hopper, &general, decode(3, 262_144)).unwrap();
    assert_eq!(o.kernel(), "qsa_topk_spec_8k");
    let c2k = switches(&[("QSA_TOPK_SPEC_CHUNK", "2048")]);
    let o = spec_options(&hopper, &c2k, decode(1, 262_144)).unwrap();
    assert_eq!(o.kernel(), "qsa_topk_spec_2k_lean");
    let c16k = switches(&[("QSA_TOPK_SPEC_CHUNK", "16384")]);
    let o = spec_options(&hopper, &c16k, decode(1, 262_144)).unwrap();
    assert_eq!(o.kernel(), "qsa_topk_spec_16k");
}

#[test]
fn unknown_spec_switch_values_name_the_choices() {
    let hopper = nvidia(vec![Feature::Clusters]);
    for (name, bad, want) in [
        (
            "QSA_TOPK_SPEC_CHUNK",
            "5000",
            "expected 2048, 4096, 8192 or 16384",
        ),
        (
            "QSA_TOPK_SPEC_FINAL",
            "bits",
            "expected byte, window or window_lean",
        ),
        ("QSA_TOPK_SPEC_BOUND", "1", "expected radix, window or tmax"),
        ("QSA_TOPK_SPEC_FENCE", "none", "expected all or one"),
        ("QSA_TOPK_SPEC_THREADS", "256", "expected 512 or 1024"),
        ("QSA_TOPK_SPEC_LOAD", "vec8", "expected scalar or vec4"),
        (
            "QSA_TOPK_SPEC_KEEP",
            "fast",
            "expected general, lean or float",
        ),
    ] {
        let e = spec_options(&hopper, &switches(&[(name, bad)]), decode(1, 262_144)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(name) && msg.contains(want),
            "{name}={bad}: {msg}"
        );
    }
}

#[test]
fn a_forced_cluster_kernel_falls_back_where_it_cannot_run() {
    let sw = forced("cluster");
    let hopper = nvidia(vec![Feature::Clusters]);
    let ampere = nvidia(vec![]);
    assert_eq!(
        choose(&hopper, &sw, decode(3, 40_000)).unwrap(),
        TopkKernel::Cluster
    );
    let prefill = TopkShape {
        has_active: true,
        ..decode(3, 40_000)
    };
    assert_eq!(
        choose(&hopper, &sw, prefill).unwrap(),
        TopkKernel::Cluster,
        "the kernel clamps per-query active counts like the others"
    );
    assert_eq!(
        choose(&ampere, &sw, decode(3, 40_000)).unwrap(),
        TopkKernel::Wide
    );
    assert_eq!(
        choose(&hopper, &sw, decode(3, CLUSTER_MAX_N + 1)).unwrap(),
        TopkKernel::Wide
    );
}

//! The race check: every top-k kernel gives the same device memory under every schedule.

use super::*;

/// The race check over every top-k kernel on wave 32 and wave 64: forward, reverse and a
/// seeded random order of threads between sync points give the same device memory after
/// every launch.
#[test]
fn topk_kernels_are_schedule_independent() {
    let small = Case {
        name: "emu_race",
        nq: 2,
        n: 1500,
        capacity: 1500,
        k: 30,
        active: Some(vec![1500, 700]),
        dists: &["ties", "nan_inf"],
    };
    let split = Case {
        name: "emu_race_split",
        nq: 1,
        n: 8500,
        capacity: 8500,
        k: 50,
        active: None,
        dists: &["adversarial"],
    };
    // The cluster kernel: parts of 2,601 entries, more than a CTA keeps as candidates
    // (2,048), so uniform rows take the bounded path and ascending rows (whose bound leaves
    // whole parts) the full one, each with several digits whose histogram buffers are
    // cleared and refilled while the cluster reads them.
    let cluster = Case {
        name: "emu_race_cluster",
        nq: 1,
        n: 20_803,
        capacity: 20_803,
        k: 300,
        active: None,
        dists: &["uniform", "ascending"],
    };
    for caps in gpu_targets()
        .into_iter()
        .filter(|c| c.name == "sm_90" || c.name == "gfx906")
    {
        for kernel in ["register", "wide"] {
            check_case(
                &caps,
                &[("QSA_TOPK_KERNEL", kernel)],
                &small,
                &Schedule::RACE_CHECK,
            );
        }
        check_case(
            &caps,
            &[("QSA_TOPK_KERNEL", "split")],
            &split,
            &Schedule::RACE_CHECK,
        );
        // The speculative kernel: chunk bounds and candidates read by the last CTA, and on
        // ascending rows its fallback over the whole row.
        check_case(
            &caps,
            &[("QSA_TOPK_KERNEL", "spec")],
            &cluster,
            &Schedule::RACE_CHECK,
        );
        // Its one-pass bound and windowed final radix, in chunks of 8,192.
        check_case(
            &caps,
            &[
                ("QSA_TOPK_KERNEL", "spec"),
                ("QSA_TOPK_SPEC_CHUNK", "8192"),
                ("QSA_TOPK_SPEC_FINAL", "window"),
                ("QSA_TOPK_SPEC_BOUND", "window"),
            ],
            &cluster,
            &Schedule::RACE_CHECK,
        );
        if caps.has(qsa::dispatch::Feature::Clusters) {
            // Its parts' bounds, counts and histograms are read across the cluster after
            // cluster barriers.
            let d = check_case(
                &caps,
                &[("QSA_TOPK_KERNEL", "cluster")],
                &cluster,
                &Schedule::RACE_CHECK,
            );
            assert!(d.iter().all(|d| d == "cluster"), "{}: {d:?}", caps.name);
        }
    }
}

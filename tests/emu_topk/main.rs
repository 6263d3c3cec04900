//! The top-k kernels (kernels/topk.cu: register, wide, split, cluster on sm_90) emulated through `EmuApi` and
//! the GPU host code of src/gpu/topk.rs, with each GPU target's dispatch from matrix.yaml:
//! ids equal the FP64-free oracle of src/reference/topk.rs (a full sort under the
//! contract), on wave 32 and wave 64, special values included; and the same memory under
//! every thread schedule (the race check).
//!
//! This file: the helpers (targets from matrix.yaml, cases, `check_case`) and the register,
//! wide and split kernels against the oracle; `spec`: the speculative kernel's variants and
//! its check; `schedules`: the race check over every kernel.

#[path = "../emu_matrix/mod.rs"]
mod emu_matrix;
mod schedules;
mod spec;

use emu_matrix::switches;

use qsa::dispatch::TargetCaps;
use qsa::emu::{race, Schedule};
use qsa::matrix::Matrix;
use qsa::problem::{Output, Problem, TopkProblem};
use qsa::reference::topk::topk_ids;
use std::path::Path;
use std::time::Instant;

fn gpu_targets() -> Vec<TargetCaps> {
    let m = Matrix::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.yaml")).unwrap();
    m.targets
        .iter()
        .filter(|t| t.is_gpu())
        .map(|t| t.caps())
        .collect()
}

struct Case {
    name: &'static str,
    nq: usize,
    n: usize,
    capacity: usize,
    k: usize,
    active: Option<Vec<i32>>,
    dists: &'static [&'static str],
}

fn problem(c: &Case, dist: &str) -> TopkProblem {
    let scores = qsa::gen::topk_scores(20261201, c.name, dist, c.nq, c.n, c.capacity, c.k).unwrap();
    TopkProblem {
        nq: c.nq,
        n: c.n,
        capacity: c.capacity,
        k: c.k,
        scores,
        active: c.active.clone(),
    }
}

/// Run every dist of `case` under `variant` on `caps`, with the race check's `schedules`;
/// returns the kernels dispatched. Panics with the target, variant, dist and first
/// differing query on a mismatch with the oracle.
fn check_case(
    caps: &TargetCaps,
    variant: &[(&str, &str)],
    case: &Case,
    schedules: &[Schedule],
) -> Vec<String> {
    let mut dispatched = Vec::new();
    for dist in case.dists {
        let p = problem(case, dist);
        let want = topk_ids(&p);
        let t = Instant::now();
        let run = race::check(
            caps,
            &switches(variant),
            &Problem::Topk(p.clone()),
            schedules,
        )
        .unwrap_or_else(|e| panic!("{} {variant:?} {} {dist}: {e}", caps.name, case.name));
        let secs = t.elapsed().as_secs_f64() / schedules.len() as f64;
        eprintln!(
            "{} {:<28} {:<13} {:<9} {:.3} s per schedule",
            caps.name,
            format!("{variant:?}"),
            case.name,
            dist,
            secs
        );
        let Output::Ids(got) = run.output else {
            panic!("top-k gave no ids")
        };
        for q in 0..p.nq {
            let (g, w) = (&got[q * p.k..][..p.k], &want[q * p.k..][..p.k]);
            assert_eq!(
                g, w,
                "{}: {} ({variant:?}) on {} {dist}, query {q}: emulated ids differ from the oracle",
                caps.name, run.dispatched, case.name
            );
        }
        dispatched.push(run.dispatched);
    }
    dispatched
}

const EDGE_DISTS: &[&str] = &[
    "uniform",
    "ties",
    "all_equal",
    "signed_zeros",
    "nan_inf",
    "ascending",
    "descending",
    "adversarial",
];

/// n <= 8192: the register kernel (auto) and the wide one, prefill counts at every edge
/// (negative, zero, below k, past n), every special distribution.
#[test]
fn register_and_wide_match_the_oracle_on_every_target() {
    let case = Case {
        name: "emu_edges",
        nq: 5,
        n: 300,
        capacity: 320,
        k: 64,
        active: Some(vec![-3, 0, 63, 200, 999]),
        dists: EDGE_DISTS,
    };
    for caps in gpu_targets() {
        let auto = check_case(&caps, &[], &case, &[Schedule::Forward]);
        assert!(
            auto.iter().all(|d| d == "register"),
            "{}: auto dispatched {auto:?}",
            caps.name
        );
        check_case(
            &caps,
            &[("QSA_TOPK_KERNEL", "wide")],
            &case,
            &[Schedule::Forward],
        );
    }
}

/// The wide kernel's small-k path (k <= waves per block: one pass, direct ranking) and its
/// fallback (more than 256 entries tie at the bound), and rows too long to stage in the
/// AMD targets' 64 KiB of LDS (n * 4 + 4 KiB > 65,536: streamed from global memory).
#[test]
fn wide_small_k_and_unstaged_rows_match_the_oracle() {
    let few = Case {
        name: "emu_wide_few",
        nq: 2,
        n: 2000,
        capacity: 2000,
        k: 8,
        active: None,
        dists: &["uniform", "ties", "all_equal", "nan_inf"],
    };
    let long = Case {
        name: "emu_wide_long",
        nq: 1,
        n: 16_000,
        capacity: 16_000,
        k: 40,
        active: Some(vec![15_999]),
        dists: &["uniform", "signed_zeros"],
    };
    for caps in gpu_targets() {
        for case in [&few, &long] {
            let d = check_case(
                &caps,
                &[("QSA_TOPK_KERNEL", "wide")],
                case,
                &[Schedule::Forward],
            );
            assert!(d.iter().all(|d| d == "wide"), "{}: {d:?}", caps.name);
        }
    }
}

/// n > 8192 in decode form: the split (auto on NVIDIA; on AMD only gfx906 behind the
/// engine's switch, else the wide kernel), and where the target has clusters (sm_90) the
/// forced cluster kernel; three chunks (cluster: eight parts) per query, ties and NaN included;
/// k = 4096 of all-equal scores leaves more candidates than the final step holds in
/// registers, so it streams them.
#[test]
fn split_matches_the_oracle_with_each_targets_dispatch() {
    let case = Case {
        name: "emu_split",
        nq: 2,
        n: 9000,
        capacity: 9010,
        k: 100,
        active: None,
        dists: &["ties", "adversarial", "nan_inf", "all_equal"],
    };
    let heavy = Case {
        name: "emu_split_heavy_ties",
        nq: 1,
        n: 9000,
        capacity: 9000,
        k: 4096,
        active: None,
        dists: &["all_equal"],
    };
    for caps in gpu_targets() {
        let auto = check_case(&caps, &[], &case, &[Schedule::Forward]);
        if caps.has(qsa::dispatch::Feature::Clusters) {
            let forced = check_case(
                &caps,
                &[("QSA_TOPK_KERNEL", "cluster")],
                &case,
                &[Schedule::Forward],
            );
            assert!(
                forced.iter().all(|d| d == "cluster"),
                "{}: {forced:?}",
                caps.name
            );
        }
        // sm_90 (clusters: the NVIDIA target it was measured on) takes the speculative
        // one-launch kernel, the other NVIDIA targets the split, AMD the wide kernel.
        let want = match caps.vendor {
            qsa::dispatch::Vendor::Nvidia if caps.has(qsa::dispatch::Feature::Clusters) => "spec",
            qsa::dispatch::Vendor::Nvidia => "split",
            _ => "wide",
        };
        assert!(
            auto.iter().all(|d| d == want),
            "{}: auto dispatched {auto:?}",
            caps.name
        );
        let sw = check_case(
            &caps,
            &[("STRATA_GFX906_TOPK_SPLIT", "1")],
            &case,
            &[Schedule::Forward],
        );
        let want = if caps.name == "gfx906" { "split" } else { want };
        assert!(
            sw.iter().all(|d| d == want),
            "{}: gfx906 switch dispatched {sw:?}",
            caps.name
        );
        check_case(
            &caps,
            &[("QSA_TOPK_KERNEL", "split")],
            &heavy,
            &[Schedule::Forward],
        );
        // The speculative kernel forced on every target; heavy ties cap every chunk at its
        // own top kc (the chunks then publish bound 0).
        for c in [&case, &heavy] {
            let d = check_case(
                &caps,
                &[("QSA_TOPK_KERNEL", "spec")],
                c,
                &[Schedule::Forward],
            );
            assert!(d.iter().all(|d| d == "spec"), "{}: {d:?}", caps.name);
        }
    }
}

/// The register kernel's small-k path (QSA_TOPK_REGISTER_FEW=1, the default; k <= 32) on wave 32 and
/// wave 64: 320 threads (units of 10 threads: pairs by shuffle, then shared atomics) with
/// prefill counts at every edge, and 256 threads (units of 8, the prefill shape's block);
/// uniform and ties (~160 entries tied at the top value reach the bound: ranked with the
/// tie-break) take the path, all_equal (every entry reaches it: more than 256 candidates)
/// falls back to the radix select.
#[test]
fn register_small_k_path_matches_the_oracle() {
    let edges = Case {
        name: "emu_register_few",
        nq: 6,
        n: 2500,
        capacity: 2503,
        k: 32,
        active: Some(vec![-1, 0, 31, 33, 1800, 4000]),
        dists: &["uniform", "ties", "all_equal", "nan_inf", "ascending"],
    };
    let prefill = Case {
        name: "emu_register_few_2k",
        nq: 3,
        n: 2048,
        capacity: 2048,
        k: 16,
        active: Some(vec![17, 1024, 2048]),
        dists: &["uniform", "ties", "signed_zeros"],
    };
    for caps in gpu_targets()
        .into_iter()
        .filter(|c| c.name == "sm_90" || c.name == "gfx906")
    {
        for case in [&edges, &prefill] {
            let d = check_case(
                &caps,
                &[
                    ("QSA_TOPK_KERNEL", "register"),
                    ("QSA_TOPK_REGISTER_FEW", "1"),
                ],
                case,
                &[Schedule::Forward],
            );
            assert!(d.iter().all(|d| d == "register"), "{}: {d:?}", caps.name);
        }
    }
}

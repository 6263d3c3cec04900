//! The top-k kernels (kernels/topk.cu: register, wide, split, cluster on sm_90) emulated through `EmuApi` and
//! the GPU host code of src/gpu/topk.rs, with each GPU target's dispatch from matrix.yaml:
//! ids equal the FP64-free oracle of src/reference/topk.rs (a full sort under the
//! contract), on wave 32 and wave 64, special values included; and the same memory under
//! every thread schedule (the race check).

mod emu_matrix;

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

/// The speculative kernel's variants (src/dispatch/topk.rs `SpecOptions`: windowed final
/// radix, one-pass chunk bound, 16-byte loads; chunks of 2,048 / 4,096 / 8,192 / 16,384) on
/// wave 32 and wave 64: query 0's row is 16-byte aligned (vec4 loads), query 1's is not
/// (capacity 18,438: scalar loads); uniform passes the check, nan_cut leaves fewer than r
/// entries in the octave of a chunk's largest key (+inf: the one-pass bound falls back to
/// two digits), ascending fails the check (the last CTA selects over the row).
#[test]
fn spec_variants_match_the_oracle() {
    let case = Case {
        name: "emu_spec_variants",
        nq: 2,
        n: 18_437,
        capacity: 18_438,
        k: 300,
        active: None,
        dists: &["uniform", "nan_cut", "ascending"],
    };
    // The general chunk step (the lean one, the engine's default since session 8, is
    // checked below).
    let all_on = [
        ("QSA_TOPK_KERNEL", "spec"),
        ("QSA_TOPK_SPEC_FINAL", "window"),
        ("QSA_TOPK_SPEC_BOUND", "window"),
        ("QSA_TOPK_SPEC_LOAD", "vec4"),
        ("QSA_TOPK_SPEC_KEEP", "general"),
    ];
    for caps in gpu_targets()
        .into_iter()
        .filter(|c| c.name == "sm_90" || c.name == "gfx906")
    {
        for chunk in ["2048", "4096", "8192", "16384"] {
            let mut v = all_on.to_vec();
            v.push(("QSA_TOPK_SPEC_CHUNK", chunk));
            let d = check_case(&caps, &v, &case, &[Schedule::Forward]);
            assert!(d.iter().all(|d| d == "spec"), "{}: {d:?}", caps.name);
        }
        // Every flag off (byte digits, two-digit bound, scalar loads): session 5's form.
        let plain = [
            ("QSA_TOPK_KERNEL", "spec"),
            ("QSA_TOPK_SPEC_FINAL", "byte"),
            ("QSA_TOPK_SPEC_BOUND", "radix"),
            ("QSA_TOPK_SPEC_LOAD", "scalar"),
            ("QSA_TOPK_SPEC_KEEP", "general"),
        ];
        check_case(&caps, &plain, &case, &[Schedule::Forward]);
        // The lean entry points (sm_90: gfx906 runs the plain form). ties (16 values, every
        // low bit 0): chunks of 4,096 hold 256 of the top value, the one-pass bound equals its
        // key, and all 256 (<= kc = 300) are kept through the lean path.
        if caps.vendor == qsa::dispatch::Vendor::Nvidia {
            let lean_case = Case {
                dists: &["uniform", "ties", "nan_cut"],
                active: None,
                ..case
            };
            for chunk in ["2048", "4096", "8192"] {
                let mut v = all_on[..4].to_vec();
                v.push(("QSA_TOPK_SPEC_CHUNK", chunk));
                v.push(("QSA_TOPK_SPEC_KEEP", "lean"));
                check_case(&caps, &v, &lean_case, &[Schedule::Forward]);
            }
            // Session 8's forms in the general step (the `_x` entry points and the 1,024-thread
            // one; their lean forms below): thread 0's
            // fences, the bound from the threads' maxima, the final's plain atomic adds; each
            // alone and all together, on both schedules (the fences order the chunks'
            // candidates before the last CTA reads them). ties: the threads' maxima are all
            // the top value (one pass, p = 0); ascending fails the check (the row's select).
            let x_forms: [&[(&str, &str)]; 4] = [
                &[("QSA_TOPK_SPEC_FENCE", "one")],
                &[("QSA_TOPK_SPEC_BOUND", "tmax")],
                &[("QSA_TOPK_SPEC_FINAL", "window_lean")],
                &[
                    ("QSA_TOPK_SPEC_FENCE", "one"),
                    ("QSA_TOPK_SPEC_BOUND", "tmax"),
                    ("QSA_TOPK_SPEC_FINAL", "window_lean"),
                ],
            ];
            let both = [Schedule::Forward, Schedule::Reverse];
            // The float step on every special the keys order: NaNs of every sign and payload
            // (nan_cut, nan_inf: key 0, kept only under bound 0), signed zeros across the cut
            // (zero_cut, signed_zeros), -inf / +inf, ties, sorted rows.
            let float_case = Case {
                dists: &[
                    "uniform",
                    "ties",
                    "nan_cut",
                    "nan_inf",
                    "zero_cut",
                    "signed_zeros",
                    "ascending",
                    "descending",
                    "adversarial",
                ],
                active: None,
                ..case
            };
            let x_case = Case {
                dists: &["uniform", "ties", "nan_cut", "ascending"],
                active: None,
                ..case
            };
            for chunk in [
                ("QSA_TOPK_SPEC_CHUNK", "4096"),
                ("QSA_TOPK_SPEC_CHUNK", "8192"),
                ("QSA_TOPK_SPEC_THREADS", "1024"),
            ] {
                for form in x_forms {
                    let general = ("QSA_TOPK_SPEC_KEEP", "general");
                    let mut v = vec![("QSA_TOPK_KERNEL", "spec"), chunk, general];
                    v.extend_from_slice(form);
                    check_case(&caps, &v, &x_case, &both);
                }
            }
            let t1024 = [
                ("QSA_TOPK_KERNEL", "spec"),
                ("QSA_TOPK_SPEC_THREADS", "1024"),
            ];
            check_case(&caps, &t1024, &x_case, &both);
            // The float-domain lean step (its own bound), alone and with the other forms.
            for chunk in ["4096", "8192"] {
                for extra in [
                    &[][..],
                    &[
                        ("QSA_TOPK_SPEC_FENCE", "one"),
                        ("QSA_TOPK_SPEC_FINAL", "window_lean"),
                    ][..],
                ] {
                    let mut v = vec![
                        ("QSA_TOPK_KERNEL", "spec"),
                        ("QSA_TOPK_SPEC_CHUNK", chunk),
                        ("QSA_TOPK_SPEC_KEEP", "float"),
                    ];
                    v.extend_from_slice(extra);
                    check_case(&caps, &v, &float_case, &both);
                }
            }
            // The lean entry points with session 8's forms (the threads' maxima bound only).
            for chunk in [
                ("QSA_TOPK_SPEC_CHUNK", "4096"),
                ("QSA_TOPK_SPEC_CHUNK", "8192"),
                ("QSA_TOPK_SPEC_THREADS", "1024"),
            ] {
                for extra in [
                    &[][..],
                    &[
                        ("QSA_TOPK_SPEC_FENCE", "one"),
                        ("QSA_TOPK_SPEC_FINAL", "window_lean"),
                    ][..],
                ] {
                    let mut v = vec![
                        ("QSA_TOPK_KERNEL", "spec"),
                        chunk,
                        ("QSA_TOPK_SPEC_KEEP", "lean"),
                        ("QSA_TOPK_SPEC_BOUND", "tmax"),
                    ];
                    v.extend_from_slice(extra);
                    check_case(&caps, &v, &x_case, &both);
                }
            }
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

/// The speculative kernel's check, which parity cannot see (its ids are exact either way):
/// on exchangeable rows every chunk's own bound lies below the query's k-th key, so the last
/// CTA proves its selection among the candidates; on ascending rows the late chunks' bounds
/// lie above it and the last CTA selects over the whole row. `spec_fell_back` reads the mark
/// the fallback leaves in the workspace. A bound that drops winners (too high, a margin too
/// small) falls back on uniform rows and fails here, naming the form.
#[test]
fn spec_check_holds_on_exchangeable_rows_and_fails_on_sorted_ones() {
    let case = Case {
        name: "emu_spec_check",
        nq: 2,
        n: 18_437,
        capacity: 18_438,
        k: 300,
        active: None,
        dists: &[],
    };
    let caps = gpu_targets()
        .into_iter()
        .find(|c| c.name == "sm_90")
        .unwrap();
    let spec = ("QSA_TOPK_KERNEL", "spec");
    let tmax = ("QSA_TOPK_SPEC_BOUND", "tmax");
    let general = ("QSA_TOPK_SPEC_KEEP", "general");
    // (form, whether ascending rows fall back). The threads' maxima bound (tmax) keeps ~8 r
    // entries of a late sorted chunk, more than k: the chunk keeps its own top k instead and
    // publishes bound 0, so its check holds there (exact, and no fallback).
    type Form<'a> = (&'a [(&'a str, &'a str)], Option<bool>);
    let forms: [Form; 13] = [
        // The engine's default on sm_90 is the float step here (18,437 keys >= 32 x 300:
        // dispatch::topk::float_by_default), which keeps its chunk's own top k on sorted rows.
        (&[spec], None),
        (&[spec, ("QSA_TOPK_SPEC_KEEP", "lean")], Some(true)),
        (&[spec, ("QSA_TOPK_SPEC_CHUNK", "2048")], Some(true)),
        (&[spec, ("QSA_TOPK_SPEC_CHUNK", "8192")], Some(true)),
        (&[spec, general], Some(true)),
        (
            &[spec, general, ("QSA_TOPK_SPEC_BOUND", "radix")],
            Some(true),
        ),
        (&[spec, tmax], None),
        (&[spec, tmax, ("QSA_TOPK_SPEC_CHUNK", "8192")], None),
        (&[spec, tmax, general], None),
        (&[spec, ("QSA_TOPK_SPEC_THREADS", "1024")], Some(true)),
        (&[spec, tmax, ("QSA_TOPK_SPEC_THREADS", "1024")], None),
        (&[spec, ("QSA_TOPK_SPEC_KEEP", "float")], None),
        (
            &[
                spec,
                ("QSA_TOPK_SPEC_KEEP", "float"),
                ("QSA_TOPK_SPEC_CHUNK", "8192"),
            ],
            None,
        ),
    ];
    for (form, sorted_falls_back) in forms {
        for (dist, want) in [("uniform", Some(false)), ("ascending", sorted_falls_back)] {
            let api = qsa::emu::api::EmuApi::new(&caps, Schedule::Forward).unwrap();
            let fell =
                qsa::gpu::topk::spec_fell_back(&api, &caps, &switches(form), &problem(&case, dist))
                    .unwrap_or_else(|e| panic!("{form:?} {dist}: {e}"));
            let Some(want) = want else { continue };
            assert!(
                fell.iter().all(|&f| f == want),
                "sm_90 {form:?} on {dist}: the last CTA fell back per query {fell:?}, want {want} \
                 ({}; the ids are exact either way)",
                if want {
                    "sorted rows must fail the check: is it still made?"
                } else {
                    "a chunk bound above the k-th key dropped a winner"
                }
            );
        }
    }
}

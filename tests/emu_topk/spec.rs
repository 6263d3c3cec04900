//! The speculative kernel (`qsa_topk_spec`, sm_90's decode top-k): its variants against the
//! oracle, and the check that proves its selection or falls back to the whole row.

use super::*;

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

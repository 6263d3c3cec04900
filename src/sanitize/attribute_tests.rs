use super::*;
use crate::sanitize::parse::parse;

/// A merged log as `exec` writes it: the runner's progress lines and the tool's report in
/// the order they were written (the report's lines: NVIDIA/compute-sanitizer-samples,
/// NvtxMemoryPool/README.md, with qsa's kernel name in place of the sample's).
const LOG: &str = "\
========= COMPUTE-SANITIZER
[1/3] sm_90 parity topk_edges_small --dist nan_inf
[2/3] sm_90 parity topk_split_edges --dist normal
========= Invalid __global__ write of size 1 bytes
=========     at 0x60 in topk_split_stage_a(float const*, int*)
=========     by thread (63,0,0) in block (0,0,0)
=========     Address 0x7f004700004f is out of bounds
=========
========= Invalid __global__ write of size 1 bytes
=========     at 0x60 in topk_split_stage_a(float const*, int*)
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f0047000010 is out of bounds
=========
[3/3] sm_90 error scores_ragged
========= ERROR SUMMARY: 2 errors
";

#[test]
fn progress_lines_name_their_unit() {
    let u = progress_unit("[2/3] sm_90 parity topk_split_edges --dist normal", "sm_90").unwrap();
    assert_eq!(
        (u.suite, u.case.as_str(), u.dist.as_str()),
        (Suite::Parity, "topk_split_edges", "normal")
    );
    let u = progress_unit("[3/3] sm_90 error scores_ragged", "sm_90").unwrap();
    assert_eq!((u.suite, u.dist.as_str()), (Suite::Error, "-"));
    let u = progress_unit(
        "[1/9] sm_90 bench x: done by an earlier run, skipped",
        "sm_90",
    )
    .unwrap();
    assert_eq!(u.case, "x");
    assert!(progress_unit("[1/3] sm_86 parity x", "sm_90").is_none());
    assert!(progress_unit("========= at 0x60 in k()", "sm_90").is_none());
}

#[test]
fn an_out_of_bounds_write_fails_the_check_of_its_case_naming_tool_and_kernel() {
    let rep = parse(LOG);
    let recs = records(
        Tool::Memcheck,
        "sm_90",
        LOG,
        &rep,
        Some(ERROR_EXITCODE),
        "x.log",
    );
    assert_eq!(recs.len(), 1, "{recs:#?}");
    let r = &recs[0];
    assert_eq!(r.status, Status::Fail);
    assert_eq!(
        (r.suite, r.case.as_str(), r.dist.as_str()),
        (Suite::Parity, "topk_split_edges", "normal"),
        "a report must be charged to the unit whose progress line precedes it"
    );
    assert_eq!(r.check, "compute-sanitizer memcheck");
    assert_eq!(r.dispatched.as_deref(), Some("topk_split_stage_a"));
    assert_eq!(
        r.message,
        "compute-sanitizer memcheck: Invalid __global__ write of size 1 bytes in kernel \
         topk_split_stage_a (by thread (63,0,0) in block (0,0,0); Address 0x7f004700004f is out \
         of bounds) while running parity topk_split_edges --dist normal; 2 reports like it"
    );
    assert_eq!(r.metrics["sanitizer_reports"], 2.0);
    assert_eq!(
        r.repro,
        "qsa run --target sm_90 --sanitize memcheck --suite parity --case topk_split_edges --dist normal"
    );
    assert!(
        r.snapshot.is_none(),
        "a sanitizer check is never snapshotted"
    );
}

#[test]
fn a_clean_run_gives_no_checks_and_an_unfinished_or_unread_one_fails() {
    let clean = "[1/1] sm_90 parity a\n========= ERROR SUMMARY: 0 errors\n";
    assert!(records(Tool::Memcheck, "sm_90", clean, &parse(clean), Some(0), "l").is_empty());

    let cut = "[1/1] sm_90 parity a\n========= COMPUTE-SANITIZER\n";
    let recs = records(Tool::Synccheck, "sm_90", cut, &parse(cut), None, "l.log");
    assert_eq!(recs.len(), 1);
    assert!(
        recs[0]
            .message
            .contains("synccheck printed no summary: it did not finish (killed by a signal)"),
        "{}",
        recs[0].message
    );

    // Counted but not read (a format this parser does not know): still a failure.
    let unread = "[1/1] sm_90 parity a\n========= ERROR SUMMARY: 3 errors\n";
    let recs = records(
        Tool::Initcheck,
        "sm_90",
        unread,
        &parse(unread),
        Some(ERROR_EXITCODE),
        "l.log",
    );
    assert_eq!(recs.len(), 1);
    assert!(
        recs[0]
            .message
            .contains("counted 3 error(s) or hazard(s) (exit 86) but qsa read no report"),
        "{}",
        recs[0].message
    );
    // The exit code alone is enough.
    let zero = "========= ERROR SUMMARY: 0 errors\n";
    assert_eq!(
        records(
            Tool::Memcheck,
            "sm_90",
            zero,
            &parse(zero),
            Some(ERROR_EXITCODE),
            "l"
        )
        .len(),
        1,
        "compute-sanitizer's --error-exitcode with no report read must still fail the run"
    );
}

#[test]
fn a_report_before_any_check_goes_to_start_up() {
    let log = "========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) on CUDA API call to cuInit.\n=========\n========= ERROR SUMMARY: 1 error\n";
    let recs = records(
        Tool::Memcheck,
        "sm_90",
        log,
        &parse(log),
        Some(ERROR_EXITCODE),
        "l",
    );
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].case, "-");
    assert!(
        recs[0].message.contains("before any check began"),
        "{}",
        recs[0].message
    );
}

/// Captured here (2026-12-01, no NVIDIA driver): compute-sanitizer 2025.3.1 from PyPI's
/// nvidia-cuda-sanitizer-api 13.0.85 running `qsa run --target cpu ...`; exit 255, no
/// summary. A run that never got going must fail, never pass for want of reports.
#[test]
fn a_run_the_tool_could_not_start_fails_with_what_it_said() {
    let log = "========= COMPUTE-SANITIZER\n\
               ========= Error: Target application terminated before first instrumented API call\n\
               ========= Error: couldn't find exit code.\n";
    let recs = records(
        Tool::Memcheck,
        "sm_90",
        log,
        &parse(log),
        Some(255),
        "l.log",
    );
    let text: Vec<&str> = recs.iter().map(|r| r.message.as_str()).collect();
    assert!(text.iter().any(|m| m.contains("Target application terminated before first instrumented API call")), "{text:#?}");
    assert!(
        text.iter()
            .any(|m| m.contains("printed no summary: it did not finish (exit 255)")),
        "{text:#?}"
    );
    assert!(recs.iter().all(|r| r.status == Status::Fail));
}

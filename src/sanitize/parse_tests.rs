//! The parser on compute-sanitizer output as the tool prints it. Where each sample comes
//! from (found through the project's code search, 2026-12-01):
//! - MEMCHECK_NO_LINEINFO: NVIDIA/compute-sanitizer-samples, NvtxPermissions/README.md
//!   (NVIDIA's own sample run, `--show-backtrace=no`; kernel built without -lineinfo).
//! - LEAK_AND_INITCHECK: NVIDIA/compute-sanitizer-samples, NvtxNaming/README.md.
//! - RACECHECK: modular/mojo-gpu-puzzles, book/src/puzzle_10/racecheck.md (the program's
//!   own lines interleaved, as in qsa's merged log).
//! - MEMCHECK_LINEINFO: the `kernel(args)+0x70 in file:line` form of current releases, with
//!   the context-poisoning "Program hit" line after it; the lines as a public sanitizer-log
//!   parser quotes its captured run (a deliberate out-of-bounds write, `nvcc -lineinfo`).
//! - OLD_CUDA_MEMCHECK: a cuda-memcheck capture (pastebin AW9vmjFs, 2014): unindented
//!   details and `path:line:signature` locations.

use super::*;

const MEMCHECK_NO_LINEINFO: &str = "\
$ compute-sanitizer --nvtx=yes --destroy-on-device-error=kernel --show-backtrace=no ./NvtxPermissions
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at 0x90 in IncrementTwice(unsigned int*)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f6f67000000 is not writable
=========
========= Invalid __global__ read of size 4 bytes
=========     at 0x20 in IncrementTwice(unsigned int*)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f6f67000000 is not readable
=========
========= Invalid __global__ read of size 4 bytes
=========     at 0x20 in IncrementTwice(unsigned int*)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f6f67000000 is not readable
=========
========= Invalid __global__ atomic of size 4 bytes
=========     at 0xa0 in IncrementTwice(unsigned int*)
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f6f67000000 is not readable/writable with atomic operations
=========
========= ERROR SUMMARY: 4 errors
";

const LEAK_AND_INITCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Leaked 1 bytes at 0x7f26c3000000 called My allocation
=========
========= LEAK SUMMARY: 1 bytes leaked in 1 allocations
========= ERROR SUMMARY: 1 error
========= COMPUTE-SANITIZER
=========  Unused memory in allocation 0x7efc4d000000 called My allocation of size 1
=========     Not written any memory.
=========     100% of allocation were unused.
=========
========= ERROR SUMMARY: 1 error
";

const RACECHECK: &str = "\
========= COMPUTE-SANITIZER
out shape: 2 x 2
Running race condition example...
========= Error: Race reported between Write access at p10_shared_memory_race_...+0x140
=========     and Read access at p10_shared_memory_race_...+0xe0 [4 hazards]
=========     and Write access at p10_shared_memory_race_...+0x140 [5 hazards]
=========
out: HostBuffer([0.0, 0.0, 0.0, 0.0])
expected: HostBuffer([6.0, 6.0, 6.0, 6.0])
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
";

const RACECHECK_CLEAN: &str = "\
========= COMPUTE-SANITIZER
out shape: 2 x 2
Running race condition example...
out: HostBuffer([6.0, 6.0, 6.0, 6.0])
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
";

const MEMCHECK_LINEINFO: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_write_kernel(int *, int)+0x70 in oob_test.cu:7
=========     by thread (31,0,0) in block (0,0,0)
=========     Access at 0x503600080 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x503600000 of size 128 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: main [0x8a2e] in oob_test
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch failure\" on CUDA API call to cudaDeviceSynchronize.
=========
========= ERROR SUMMARY: 3 errors
";

const OLD_CUDA_MEMCHECK: &str = "\
========= CUDA-MEMCHECK
========= Invalid __global__ read of size 8
========= at 0x000000c8 in /home/ubuntu/Test0001/Debug/../src/my_helper.cuh:75:void vector_projection<double>(double*, int)
========= by thread (9,0,0) in block (0,0,0)
========= Address 0x000370e8 is out of bounds
=========
";

#[test]
fn memcheck_findings_name_kernel_thread_and_address() {
    let r = parse(MEMCHECK_NO_LINEINFO);
    assert_eq!(r.errors, Some(4));
    assert_eq!(r.findings.len(), 4, "{r:#?}");
    let f = &r.findings[0];
    assert_eq!(f.what, "Invalid __global__ write of size 4 bytes");
    assert_eq!(f.kernel.as_deref(), Some("IncrementTwice"));
    assert_eq!(
        f.thread.as_deref(),
        Some("by thread (0,0,0) in block (0,0,0)")
    );
    assert_eq!(f.details, vec!["Address 0x7f6f67000000 is not writable"]);
    assert_eq!(f.line, 2);
    assert!(r.findings[3].what.contains("atomic"));
    assert_eq!(r.summary_count(), Some(4));
}

#[test]
fn lineinfo_locations_and_api_errors_are_findings_backtraces_are_not_details() {
    let r = parse(MEMCHECK_LINEINFO);
    assert_eq!(r.errors, Some(3));
    assert_eq!(r.findings.len(), 2, "{r:#?}");
    assert_eq!(r.findings[0].kernel.as_deref(), Some("oob_write_kernel"));
    assert_eq!(
        r.findings[0].details,
        vec![
            "Access at 0x503600080 is out of bounds",
            "and is 1 bytes after the nearest allocation at 0x503600000 of size 128 bytes"
        ]
    );
    assert!(r.findings[1]
        .what
        .starts_with("Program hit cudaErrorLaunchFailure"));
    assert_eq!(r.findings[1].kernel, None);
}

#[test]
fn racecheck_hazards_and_their_summary() {
    let r = parse(RACECHECK);
    assert_eq!(r.hazards, Some((1, 1, 0)));
    assert_eq!(r.errors, None);
    assert_eq!(r.findings.len(), 1, "{r:#?}");
    let f = &r.findings[0];
    assert!(f
        .what
        .starts_with("Error: Race reported between Write access"));
    assert_eq!(f.kernel.as_deref(), Some("p10_shared_memory_race_..."));
    assert_eq!(f.details.len(), 2);
    assert!(f.details[0].ends_with("[4 hazards]"));
    assert_eq!(r.summary_count(), Some(1));

    let clean = parse(RACECHECK_CLEAN);
    assert!(clean.findings.is_empty(), "{clean:#?}");
    assert_eq!(clean.summary_count(), Some(0));
}

#[test]
fn leaks_and_initcheck_reports_are_findings() {
    let r = parse(LEAK_AND_INITCHECK);
    assert_eq!(r.findings.len(), 2, "{r:#?}");
    assert!(r.findings[0].what.starts_with("Leaked 1 bytes"));
    assert!(r.findings[1]
        .what
        .starts_with("Unused memory in allocation"));
    assert_eq!(r.findings[1].details[0], "Not written any memory.");
    assert_eq!(r.errors, Some(1));
}

#[test]
fn old_unindented_reports_and_path_signature_locations() {
    let r = parse(OLD_CUDA_MEMCHECK);
    assert_eq!(r.findings.len(), 1, "{r:#?}");
    let f = &r.findings[0];
    assert_eq!(f.kernel.as_deref(), Some("vector_projection<double>"));
    assert_eq!(
        f.thread.as_deref(),
        Some("by thread (9,0,0) in block (0,0,0)")
    );
    assert_eq!(r.errors, None, "no summary: the run did not finish");
    assert_eq!(r.summary_count(), None);
}

#[test]
fn a_summary_in_a_format_not_understood_counts_as_a_hazard() {
    let r = parse("========= RACECHECK SUMMARY: some hazards (new format)\n");
    assert_eq!(r.hazards, Some((1, 1, 1)));
    assert_eq!(r.summary_count(), Some(2));
}

#[test]
fn kernel_names_from_every_location_shape() {
    for (at, want) in [
        (
            "reverseArray(const float *, float *, int)+0x70 in s.cu:25",
            "reverseArray",
        ),
        ("0x90 in IncrementTwice(unsigned int*)", "IncrementTwice"),
        (
            "unaligned_kernel():0x160 in memcheck_demo.cu:6",
            "unaligned_kernel",
        ),
        ("qsa_topk_wide+0x1f0", "qsa_topk_wide"),
        (
            "0xc8 in a/b.cuh:75:void k<double>(double*, int)",
            "k<double>",
        ),
    ] {
        assert_eq!(kernel_of(at).as_deref(), Some(want), "{at}");
    }
    assert_eq!(kernel_of("0x90"), None);
}

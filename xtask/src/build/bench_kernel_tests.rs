//! `bench/kernels/*.cu` are not qsa kernels (no dispatch, no golden resources, not in the
//! matrix): the H200 call scripts build them by hand for the benches (`bench/hbm_floor.py`).
//! So that they cannot rot between sessions, this compiles each with the project's nvcc, with
//! the flags the call scripts use: warnings are errors, spills are reported.

use super::toolchain::nvcc_or_skip;
use std::path::Path;
use std::process::Command;

/// The flags of docs/results/session19-2026-12-04/calls/s19a.sh's build of hbm_read.cubin.
const FLAGS: &[&str] = &[
    "-cubin",
    "-arch=sm_90",
    "-O3",
    "-Xptxas",
    "-warn-spills",
    "-Werror",
    "all-warnings",
];

#[test]
fn bench_kernels_compile_without_warnings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let Some(tc) = nvcc_or_skip(root, "bench_kernels_compile_without_warnings") else {
        return;
    };
    let mut sources: Vec<_> = std::fs::read_dir(root.join("bench/kernels"))
        .expect("bench/kernels exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    sources.sort();
    assert!(!sources.is_empty(), "no bench/kernels/*.cu to compile");
    let out_dir = tempfile::tempdir().unwrap();
    for src in &sources {
        let cubin = out_dir.path().join("out.cubin");
        let out = Command::new(&tc.compiler)
            .args(FLAGS)
            .arg("-o")
            .arg(&cubin)
            .arg(src)
            .output()
            .expect("nvcc runs");
        assert!(
            out.status.success() && cubin.is_file(),
            "{} does not compile cleanly with {} {}:\n{}{}\nfix the source: the H200 calls build it with these flags",
            src.display(),
            tc.describe(),
            FLAGS.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

//! The decode's timeline build (`-DQSA_DEC_TRACE`, tools/h200-decode-trace/) is made by hand on
//! the H200, never by `cargo xtask build`: without this test its stamps could stop compiling,
//! or compile to nothing, and the first sign would be a wasted device call. It compiles the two
//! decode kernels the dispatch defaults to (16 queries: `qsa_attn_dec_fwd_bf16`; one query:
//! `qsa_attn_dec_qs_cl_fwd_bf16`), instantiated by the lines of selection_attention.cu itself,
//! with the tool's documented flags, and asks that the stamp array is in the cubin; then without
//! the macro, and asks that it is not (the shipped kernels carry no stamps).
//! Both kernels take about 4 s on 2 cores, where the whole file takes about 80.

use super::toolchain::nvcc_or_skip;
use std::path::Path;
use std::process::Command;

/// The tool's README command, less its source and output (checked against the README below).
const TRACE_FLAGS: &[&str] = &[
    "-cubin",
    "-arch=sm_90a",
    "-O3",
    "-Ikernels",
    "-DQSA_DEC_TRACE",
    "-Werror",
    "all-warnings",
];
/// The kernels the dispatch takes for issue 13's decode shapes (golden/sm_90/dispatch.snap).
const DEFAULT_DECODE_KERNELS: &[&str] = &["qsa_attn_dec_fwd_bf16", "qsa_attn_dec_qs_cl_fwd_bf16"];
/// The `__device__` array the stamps land in (kernels/common/attention_decode_unit.h), which
/// tools/h200-decode-trace/trace.py reads by this name.
const STAMP_SYMBOL: &[u8] = b"dec_trace";

/// The instance line of `kernel` in selection_attention.cu (`QSA_ATTN_DECODE_*INSTANCE(kernel, ...)`).
fn instance_line<'a>(source: &'a str, kernel: &str) -> &'a str {
    let opening = format!("({kernel},");
    source
        .lines()
        .find(|l| l.starts_with("QSA_ATTN_DECODE_") && l.contains(&opening))
        .unwrap_or_else(|| {
            panic!(
                "kernels/selection_attention.cu has no QSA_ATTN_DECODE_*INSTANCE line for {kernel}: \
                 update DEFAULT_DECODE_KERNELS (xtask/src/build/trace_build_tests.rs) to the decode \
                 kernels the dispatch defaults to now"
            )
        })
}

/// Compiles `unit` with `flags` and returns whether the cubin holds the stamp array.
fn compile_has_stamps(
    compiler: &Path,
    root: &Path,
    unit: &Path,
    flags: &[&str],
    what: &str,
) -> bool {
    let cubin = unit.with_extension("cubin");
    let out = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&cubin)
        .arg(unit)
        .current_dir(root)
        .output()
        .expect("nvcc runs");
    assert!(
        out.status.success() && cubin.is_file(),
        "the decode's {what} does not compile cleanly ({} {}):\n{}{}\nfix the DEC_STAMP code in \
         kernels/common/attention_decode*.h: tools/h200-decode-trace/ builds it on the H200",
        compiler.display(),
        flags.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&cubin).unwrap();
    bytes.windows(STAMP_SYMBOL.len()).any(|w| w == STAMP_SYMBOL)
}

#[test]
fn decode_trace_build_compiles_and_stamps() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let readme = std::fs::read_to_string(root.join("tools/h200-decode-trace/README.md")).unwrap();
    let documented = TRACE_FLAGS.join(" ");
    assert!(
        readme
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains(&documented),
        "tools/h200-decode-trace/README.md no longer builds with `{documented}`: this test \
         compiles what the README documents, so change both together"
    );
    let Some(tc) = nvcc_or_skip(root, "decode_trace_build_compiles_and_stamps") else {
        return;
    };
    let source = std::fs::read_to_string(root.join("kernels/selection_attention.cu")).unwrap();
    let mut unit_text =
        String::from("#include \"common/portable.h\"\n#include \"common/attention_decode.h\"\n");
    for kernel in DEFAULT_DECODE_KERNELS {
        unit_text.push_str(instance_line(&source, kernel));
        unit_text.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("decode_trace.cu");
    std::fs::write(&unit, unit_text).unwrap();

    assert!(
        compile_has_stamps(&tc.compiler, root, &unit, TRACE_FLAGS, "trace build"),
        "the -DQSA_DEC_TRACE build of {DEFAULT_DECODE_KERNELS:?} has no `dec_trace` array: \
         DEC_STAMP compiled to nothing (see the #if before it in \
         kernels/common/attention_decode_unit.h), so tools/h200-decode-trace/trace.py would read zeros"
    );
    let shipped: Vec<&str> = TRACE_FLAGS
        .iter()
        .copied()
        .filter(|f| *f != "-DQSA_DEC_TRACE")
        .collect();
    assert!(
        !compile_has_stamps(&tc.compiler, root, &unit, &shipped, "shipped build"),
        "without -DQSA_DEC_TRACE the decode kernels still carry the `dec_trace` stamps: the \
         shipped kernels would pay for the stores"
    );
}

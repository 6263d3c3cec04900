//! The emulator under a compiler that fortifies by default. Ubuntu's g++ predefines
//! `_FORTIFY_SOURCE=3`; the H200 image's g++ 13.3 did, and every emulated module aborted
//! there ("*** buffer overflow detected ***", 2026-12-01): the runtime poisons a block's
//! shared memory through a one-byte thread-local anchor, which fortified memset reads as an
//! overflow. src/emu/compile.rs passes `-U_FORTIFY_SOURCE`; this test compiles a probe with
//! a fortifying wrapper (tests/emu/cxx-fortify3.sh) and runs a kernel with shared memory.
//! Its own binary, so the environment it sets reaches no other test.
mod emu_mma_probes;

use emu_mma_probes::*;
use std::path::PathBuf;

#[test]
fn emulated_modules_run_when_the_compiler_fortifies() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cache = root.join("target/emu-fortify-test");
    let _ = std::fs::remove_dir_all(&cache);
    std::env::set_var("QSA_EMU_CXX", root.join("tests/emu/cxx-fortify3.sh"));
    std::env::set_var("QSA_EMU_CACHE", &cache);
    let (src, row_of) = ldmatrix_inputs();
    let out = with_emulated_sm90(run_ldmatrix);
    // Lane 0's first register: matrix 0, rows 0 and 1, column 0 (tests/emu_mma.rs checks all).
    let want = src[row_of[0] as usize * 16] as u32 | (src[row_of[1] as usize * 16] as u32) << 16;
    assert_eq!(out[0], want, "ldmatrix through the fortified build");
    let _ = std::fs::remove_dir_all(&cache);
}

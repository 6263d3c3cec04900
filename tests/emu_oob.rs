//! The emulator's out-of-bounds check (src/emu/api.rs guard zones) through tests/emu/oob.cu:
//! a kernel storing past the end or before the start of a buffer fails its launch with a
//! message naming the kernel, the allocation and the offsets, never a crash or silence.

mod emu_probe;

use qsa::emu::Schedule;

/// The error of one block of 64 threads storing 7 at out[t + offset], out 64 ints.
fn launch_error(offset: i32) -> String {
    let r = emu_probe::launch_block(
        Schedule::Forward,
        "oob.cu",
        "probe_oob_store",
        64,
        &[],
        64,
        &[offset],
    );
    match r {
        Err(e) => e,
        Ok(_) => panic!(
            "a store at offset {offset} of a 64-int buffer passed its launch: the emulator's guard-zone check (src/emu/api.rs check_guards) missed it"
        ),
    }
}

#[test]
fn in_bounds_stores_pass() {
    let out = emu_probe::launch_block(
        Schedule::Forward,
        "oob.cu",
        "probe_oob_store",
        64,
        &[],
        64,
        &[0],
    );
    assert_eq!(out.unwrap(), vec![7; 64]);
}

#[test]
fn a_store_past_the_end_fails_the_launch_by_name() {
    // Threads 32..63 store ints 64..95: bytes 0..127 past the end.
    let e = launch_error(32);
    assert!(
        e.contains("emulated probe_oob_store: out-of-bounds global write: 128 bytes changed around allocation #0 (256 bytes")
            && e.contains("from byte 0 past its end to byte 127 past its end"),
        "{e}"
    );
}

#[test]
fn a_store_before_the_start_fails_the_launch_by_name() {
    // Threads 0..9 store ints -10..-1: the 40 bytes before the start.
    let e = launch_error(-10);
    assert!(
        e.contains("out-of-bounds global write: 40 bytes changed around allocation #0")
            && e.contains("from byte 40 before its start to byte 1 before its start"),
        "{e}"
    );
}

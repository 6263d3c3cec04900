//! The emulator's out-of-bounds check (src/emu/guard.rs guard zones) through tests/emu/oob.cu:
//! a kernel storing past the end or before the start of a buffer, or loading past its end,
//! fails its launch with a message naming the kernel, the allocation and the offsets, never a
//! crash or silence.

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

/// The error of one block of 64 threads loading in[t + offset] into out[t], `in` and out 64
/// ints each (`in` is allocation #0).
fn load_error(offset: i32) -> String {
    let input: Vec<i32> = (0..64).collect();
    match emu_probe::launch_block(
        Schedule::Forward,
        "oob.cu",
        "probe_oob_load",
        64,
        &[&input],
        64,
        &[offset],
    ) {
        Err(e) => e,
        Ok(_) => panic!(
            "a load at offset {offset} of a 64-int buffer passed its launch: the emulator's guard zones (src/emu/guard.rs) missed a read"
        ),
    }
}

#[test]
fn in_bounds_loads_pass() {
    let input: Vec<i32> = (0..64).collect();
    let out = emu_probe::launch_block(
        Schedule::Forward,
        "oob.cu",
        "probe_oob_load",
        64,
        &[&input],
        64,
        &[0],
    );
    assert_eq!(out.unwrap(), input);
}

#[test]
fn a_load_one_past_the_end_fails_the_launch_by_name() {
    // Thread 63 loads int 64: the 4 bytes just past the end.
    let e = load_error(1);
    assert!(
        e.contains("emulated probe_oob_load: out-of-bounds global read: allocation #0 (256 bytes")
            && e.contains("first at byte 0 past its end"),
        "{e}"
    );
}

#[test]
fn a_load_far_past_the_end_fails_the_launch_by_name() {
    // Threads load ints 100,000 .. 100,063: 399,744 bytes past the end, in the zone's far part.
    let e = load_error(100_000);
    assert!(
        e.contains("out-of-bounds global read: allocation #0")
            && e.contains("first at byte 399744 past its end"),
        "{e}"
    );
}

#[test]
fn a_store_far_past_the_end_fails_the_launch_by_name() {
    // Threads 0..63 store 7 at ints 100,000 .. 100,063: from 399,744 bytes past the end, in
    // the zone's far part (zeros: the 7s' low bytes are the changed ones).
    let e = launch_error(100_000);
    assert!(
        e.contains("emulated probe_oob_store: out-of-bounds global write: 64 bytes changed around allocation #0")
            && e.contains("from byte 399744 past its end to byte 399996 past its end"),
        "{e}"
    );
}

#[test]
fn a_failed_launch_leaves_the_zones_closed_for_the_next() {
    // One allocation, two launches: the first reads past the end and fails; the zone it
    // opened is closed again, so the second's read past the end fails too.
    use qsa::emu::api::EmuApi;
    use qsa::gpu::{as_bytes, Arg, GpuApi, LaunchDims};
    let api = EmuApi::new(&emu_probe::sm_90(1), Schedule::Forward).unwrap();
    let input = api.alloc(256).unwrap();
    api.upload(input, as_bytes(&[1i32; 64])).unwrap();
    let out = api.alloc(256).unwrap();
    let dims = LaunchDims {
        grid: (1, 1, 1),
        block: (64, 1, 1),
        shared_bytes: 0,
    };
    for (offset, ok) in [(1, false), (0, true), (1, false)] {
        let r = api.launch_source(
            &emu_probe::source("oob.cu"),
            "probe_oob_load",
            dims,
            &[Arg::Ptr(input), Arg::Ptr(out), Arg::I32(offset)],
        );
        match r {
            Ok(()) => assert!(ok, "offset {offset}: passed"),
            Err(e) => assert!(
                !ok && e.to_string().contains("out-of-bounds global read"),
                "offset {offset}: {e}"
            ),
        }
    }
}

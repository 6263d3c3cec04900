//! The emulator's mbarriers and 1-D bulk copies (mbarrier.h's host branch, modelled in
//! kernels/common/emu_mbarrier.h) through tests/emu/mbarrier.cu. Expected behaviour is PTX's
//! (a phase completes when its arrivals and its transaction bytes are all in; try_wait.parity
//! returns once that phase is over), not the model's code: a reader that waits reads the
//! copied values under every schedule, one that does not (the plant) reads the block's own
//! stores under a schedule that lands copies lazily; an abandoned copy, a wait that never
//! completes and an over-arrival are errors that name the cause, never hangs.

mod emu_probe;

use qsa::emu::Schedule;

/// Launch probe_mbar_copy (one block of 128 threads) in `mode`: out's 128 ints, or the error.
fn launch(mode: i32, schedule: Schedule) -> Result<Vec<i32>, String> {
    let src: Vec<i32> = (0..128).map(|i| 1000 + i).collect();
    emu_probe::launch_block(
        schedule,
        "mbarrier.cu",
        "probe_mbar_copy",
        128,
        &[&src],
        128,
        &[mode],
    )
}

fn copied(out: &[i32]) -> bool {
    out.iter().enumerate().all(|(i, &v)| v == 1000 + i as i32)
}

#[test]
fn a_reader_waiting_on_the_mbarrier_reads_the_bulk_copy() {
    for schedule in Schedule::RACE_CHECK
        .into_iter()
        .chain([Schedule::WaveFirst])
    {
        let out = launch(0, schedule).unwrap();
        assert!(copied(&out), "{}: {:?}", schedule.name(), &out[..4]);
    }
}

/// The plant: without the wait, the forward schedule (copies land at the first poll of their
/// mbarrier, and nobody polls) leaves the block's own -7s in place for the readers, and the
/// copy still in flight when the block exits is reported.
#[test]
fn a_reader_that_skips_the_wait_is_reported() {
    let e = launch(1, Schedule::Forward).unwrap_err();
    assert!(e.contains("bulk copies (cp.async.bulk) in flight"), "{e}");
}

#[test]
fn an_abandoned_copy_a_wait_never_satisfied_and_an_over_arrival_are_named() {
    let e = launch(2, Schedule::Forward).unwrap_err();
    assert!(
        e.contains("the block exited with 1 bulk copies (cp.async.bulk) in flight"),
        "{e}"
    );
    let e = launch(3, Schedule::Forward).unwrap_err();
    assert!(
        e.contains("live threads wait on mbarrier phases that never complete"),
        "{e}"
    );
    let e = launch(4, Schedule::Forward).unwrap_err();
    assert!(e.contains("more arrivals than its count"), "{e}");
}

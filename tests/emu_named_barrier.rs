//! The emulator's named barriers (bar.sync / bar.arrive: mma.h's qsa_bar_sync /
//! qsa_bar_arrive, modelled in kernels/common/emu_blocks.h) through tests/emu/named_barrier.cu.
//! The expected behaviour is PTX's (a barrier completes when `count` threads have arrived;
//! bar.arrive does not wait), not the model's code: a consumer that waits for its producer's
//! arrival reads what the producer stored, one that does not (the plant) reads the poison
//! the emulator fills shared memory with under the wave-first schedule (consumer warps run
//! first); a sync whose count is never reached and an arrival nobody consumes are errors that
//! name the barrier, never hangs.

mod emu_probe;

use qsa::emu::Schedule;

/// Launch `kernel` (one block of 256 threads) with (out, mode); out's 256 ints, or the error.
fn launch(kernel: &str, mode: i32, schedule: Schedule) -> Result<Vec<i32>, String> {
    emu_probe::launch_block(schedule, "named_barrier.cu", kernel, 256, &[], 256, &[mode])
}

/// The first consumer slot that does not hold the producer's value.
fn handoff_error(out: &[i32]) -> Option<String> {
    (0..128)
        .find(|&i| out[i] != 1000 + i as i32)
        .map(|i| format!("out[{i}] = {}, the producer stored {}", out[i], 1000 + i))
}

#[test]
fn a_consumer_waiting_at_the_named_barrier_reads_the_producers_stores() {
    for schedule in [Schedule::Forward, Schedule::Reverse, Schedule::WaveFirst] {
        let out = launch("probe_named_handoff", 0, schedule).unwrap();
        if let Some(e) = handoff_error(&out) {
            panic!("{}: consumer after bar.sync 1, 256: {e}", schedule.name());
        }
    }
}

/// The plant: without the sync the consumer warps (warpgroup 0, run first by the wave-first
/// schedule) read shared memory before the producer stored it.
#[test]
fn a_consumer_that_skips_the_sync_reads_poison() {
    let out = launch("probe_named_handoff", 1, Schedule::WaveFirst).unwrap();
    assert!(
        handoff_error(&out).is_some(),
        "a consumer without bar.sync still read the producer's values: the wave-first schedule or the model lets it wait"
    );
}

#[test]
fn a_count_never_reached_and_a_pending_arrival_are_named() {
    let e = launch("probe_named_misuse", 1, Schedule::Forward).unwrap_err();
    assert!(
        e.contains(
            "deadlock: 128 of 128 live threads wait at named barriers (id 2: 128 of 256 arrived)"
        ),
        "{e}"
    );
    let e = launch("probe_named_misuse", 2, Schedule::Forward).unwrap_err();
    assert!(
        e.contains("exited with arrivals pending at named barriers (id 3: 128 of 256 arrived)"),
        "{e}"
    );
}

/// Every thread must reach a CTA-wide barrier after the same number of barrier waits: the
/// PTX model orders the program either way, but compute-sanitizer racecheck counts barriers
/// per warp (wg2's hazard, session 11 call C), so an unbalanced sequence is an error naming
/// the barrier; balanced sequences pass, under every schedule.
#[test]
fn unbalanced_barrier_counts_at_a_cta_barrier_are_named() {
    for schedule in [Schedule::Forward, Schedule::Reverse, Schedule::WaveFirst] {
        for mode in [0, 2] {
            let out = launch("probe_named_balance", mode, schedule)
                .unwrap_or_else(|e| panic!("{} mode {mode}: {e}", schedule.name()));
            assert_eq!(out[255], 255);
        }
    }
    for (mode, what) in [(1, "__syncthreads"), (3, "named barrier 3")] {
        let e = launch("probe_named_balance", mode, Schedule::Forward).expect_err(&format!(
            "unbalanced barrier counts at {what} passed the emulator's balance check"
        ));
        assert!(
            e.contains(&format!(
                "{what} (every thread of the block waits there) reached by thread 0 after 2 barrier waits and thread 128 after 3 (this one counted)"
            )) && e.contains("unbalanced barrier sequences"),
            "{e}"
        );
    }
}

//! The emulator's mbarriers and 1-D bulk copies (mbarrier.h's host branch, modelled in
//! kernels/common/emu_mbarrier.h) through tests/emu/mbarrier.cu. Expected behaviour is PTX's
//! (a phase completes when its arrivals and its transaction bytes are all in; try_wait.parity
//! returns once that phase is over), not the model's code: a reader that waits reads the
//! copied values under every schedule, one that does not (the plant) reads the block's own
//! stores under a schedule that lands copies lazily; an abandoned copy, a wait that never
//! completes and an over-arrival are errors that name the cause, never hangs.

use qsa::dispatch::{TargetCaps, Vendor};
use qsa::emu::api::EmuApi;
use qsa::emu::Schedule;
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, GpuApi, LaunchDims};
use std::path::PathBuf;

fn sm_90() -> TargetCaps {
    TargetCaps {
        name: "sm_90".into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: 232_448,
        multiprocessors: 2,
        features: vec![],
    }
}

/// Launch probe_mbar_copy (one block of 128 threads) in `mode`: out's 128 ints, or the error.
fn launch(mode: i32, schedule: Schedule) -> Result<Vec<i32>, String> {
    let api = EmuApi::new(&sm_90(), schedule).unwrap();
    let src: Vec<i32> = (0..128).map(|i| 1000 + i).collect();
    let (ps, out) = (api.alloc(512).unwrap(), api.alloc(512).unwrap());
    api.upload(ps, as_bytes(&src)).unwrap();
    api.upload(out, as_bytes(&[-1i32; 128])).unwrap();
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/emu/mbarrier.cu");
    let dims = LaunchDims {
        grid: (1, 1, 1),
        block: (128, 1, 1),
        shared_bytes: 0,
    };
    api.launch_source(
        &file,
        "probe_mbar_copy",
        dims,
        &[Arg::Ptr(ps), Arg::Ptr(out), Arg::I32(mode)],
    )
    .map_err(|e| e.to_string())?;
    let mut v = vec![0i32; 128];
    api.download(out, as_bytes_mut(&mut v)).unwrap();
    Ok(v)
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

//! What the emulator's primitive probes share (tests/emu/*.cu, one block per launch): the
//! sm_90 caps they run under and one launch of a probe kernel with int buffers.
#![allow(dead_code)] // each test binary uses its own subset

use qsa::dispatch::{TargetCaps, Vendor};
use qsa::emu::api::EmuApi;
use qsa::emu::Schedule;
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, GpuApi, LaunchDims};
use std::path::PathBuf;

/// An H200-like sm_90 with `multiprocessors` SMs (the emulator runs that many blocks at once).
pub fn sm_90(multiprocessors: u32) -> TargetCaps {
    TargetCaps {
        name: "sm_90".into(),
        vendor: Vendor::Nvidia,
        wave: 32,
        shared_per_block: 232_448,
        multiprocessors,
        features: vec![],
    }
}

/// `tests/emu/<file>` in this repository.
pub fn source(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/emu")
        .join(file)
}

/// Launch `kernel` of `tests/emu/<file>` as one block of `threads` under `schedule`, with the
/// arguments: a buffer per `inputs` (uploaded), the output (`out_len` ints, -1 before the
/// launch), then `ints`. The output after the launch, or the launch's error as text.
pub fn launch_block(
    schedule: Schedule,
    file: &str,
    kernel: &str,
    threads: u32,
    inputs: &[&[i32]],
    out_len: usize,
    ints: &[i32],
) -> Result<Vec<i32>, String> {
    let api = EmuApi::new(&sm_90(2), schedule).unwrap();
    let mut args = Vec::new();
    for data in inputs {
        let p = api.alloc(4 * data.len()).unwrap();
        api.upload(p, as_bytes(data)).unwrap();
        args.push(Arg::Ptr(p));
    }
    let out = api.alloc(4 * out_len).unwrap();
    api.upload(out, as_bytes(&vec![-1i32; out_len])).unwrap();
    args.push(Arg::Ptr(out));
    args.extend(ints.iter().map(|&i| Arg::I32(i)));
    let dims = LaunchDims {
        grid: (1, 1, 1),
        block: (threads, 1, 1),
        shared_bytes: 0,
    };
    api.launch_source(&source(file), kernel, dims, &args)
        .map_err(|e| e.to_string())?;
    let mut v = vec![0i32; out_len];
    api.download(out, as_bytes_mut(&mut v)).unwrap();
    Ok(v)
}

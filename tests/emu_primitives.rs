//! The SIMT emulator's primitives against their documented CUDA / HIP semantics, on wave 32
//! (an NVIDIA and an AMD RDNA target) and wave 64 (AMD CDNA), through tests/emu/primitives.cu.
//! The expected values are written from the CUDA Programming Guide's and HIP's definitions,
//! not from the emulator's code.

use qsa::backend::BackendError;
use qsa::dispatch::{TargetCaps, Vendor};
use qsa::emu::api::EmuApi;
use qsa::emu::race;
use qsa::emu::Schedule;
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, DevPtr, GpuApi, LaunchDims};
use std::path::PathBuf;

fn caps(name: &str, vendor: Vendor, wave: u32, shared: u32) -> TargetCaps {
    TargetCaps {
        name: name.into(),
        vendor,
        wave,
        shared_per_block: shared,
        multiprocessors: 4,
        features: vec![],
    }
}

/// One target of each flavour the emulator builds: NVIDIA w32, AMD w32 (64-bit masks), AMD w64.
fn targets() -> Vec<TargetCaps> {
    vec![
        caps("sm_90", Vendor::Nvidia, 32, 232_448),
        caps("gfx1201", Vendor::Amd, 32, 65_536),
        caps("gfx906", Vendor::Amd, 64, 65_536),
    ]
}

fn source() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/emu/primitives.cu")
}

fn dims(grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32) -> LaunchDims {
    LaunchDims {
        grid,
        block,
        shared_bytes: shared,
    }
}

struct Buf<'a> {
    api: &'a EmuApi,
    ptr: DevPtr,
}

impl<'a> Buf<'a> {
    fn new<T: Copy>(api: &'a EmuApi, init: &[T]) -> Self {
        let ptr = api.alloc(std::mem::size_of_val(init)).unwrap();
        api.upload(ptr, as_bytes(init)).unwrap();
        Buf { api, ptr }
    }
    fn arg(&self) -> Arg {
        Arg::Ptr(self.ptr)
    }
    fn read<T: Copy + Default>(&self, n: usize) -> Vec<T> {
        let mut v = vec![T::default(); n];
        self.api.download(self.ptr, as_bytes_mut(&mut v)).unwrap();
        v
    }
}

fn launch(api: &EmuApi, kernel: &str, d: LaunchDims, args: &[Arg]) -> Result<(), BackendError> {
    api.launch_source(&source(), kernel, d, args)
}

#[test]
fn indices_cover_grid_and_block() {
    let c = &targets()[0];
    let api = EmuApi::new(c, Schedule::Forward).unwrap();
    let (grid, block) = ((2, 3, 1), (4, 2, 2));
    let total = 6 * 16;
    let out = Buf::new(&api, &vec![-1i32; 8 * total]);
    launch(&api, "emu_indices", dims(grid, block, 0), &[out.arg()]).unwrap();
    let v: Vec<i32> = out.read(8 * total);
    for b in 0..6usize {
        for t in 0..16usize {
            let r = &v[8 * (b * 16 + t)..][..8];
            let want = [t % 4, (t / 4) % 2, t / 8, b % 2, b / 2, 0, 16, 6].map(|x| x as i32);
            assert_eq!(r, want, "emu_indices: block {b} thread {t}");
        }
    }
}

/// The source lane of each shuffle mode, from the CUDA Programming Guide (warp shuffle
/// functions): lanes form segments of `width`; shfl reads lane `arg mod width` of the
/// segment; up reads lane - d unless that leaves the segment; down reads lane + d likewise;
/// xor reads lane ^ m when it is in the segment (HIP: when it is not past the segment's
/// end); otherwise the lane keeps its own value.
fn expected_source(mode: usize, lane: usize, arg: usize, width: usize) -> usize {
    let seg = lane / width * width;
    match mode {
        0 => seg + arg % width,
        1 => {
            let j = lane ^ arg;
            if j >= seg && j < seg + width {
                j
            } else {
                lane
            }
        }
        2 => {
            if lane - seg >= arg {
                lane - arg
            } else {
                lane
            }
        }
        _ => {
            if lane - seg + arg < width {
                lane + arg
            } else {
                lane
            }
        }
    }
}

#[test]
fn shuffles_follow_cuda_semantics_on_wave_32_and_64() {
    for c in targets() {
        let api = EmuApi::new(&c, Schedule::Reverse).unwrap();
        let w = c.wave as usize;
        let n = 2 * w; // two waves
        for width in [w, w / 2, 4, 1] {
            for arg in [0usize, 1, 3, width.saturating_sub(1), 5] {
                let out = Buf::new(&api, &vec![0i32; 4 * n]);
                let args = [out.arg(), Arg::I32(arg as i32), Arg::I32(width as i32)];
                launch(
                    &api,
                    "emu_shuffles",
                    dims((1, 1, 1), (n as u32, 1, 1), 0),
                    &args,
                )
                .unwrap();
                let v: Vec<i32> = out.read(4 * n);
                for (mode, name) in ["shfl", "shfl_xor", "shfl_up", "shfl_down"]
                    .iter()
                    .enumerate()
                {
                    for t in 0..n {
                        let wave_base = t / w * w;
                        let src = wave_base + expected_source(mode, t % w, arg, width);
                        assert_eq!(
                            v[mode * n + t],
                            1000 + src as i32,
                            "{}: {name}(arg {arg}, width {width}) in thread {t}",
                            c.name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn wave_helpers_of_portable_h() {
    for c in targets() {
        let api = EmuApi::new(&c, Schedule::Random(7)).unwrap();
        let w = c.wave as usize;
        let n = 2 * w;
        let f = Buf::new(&api, &vec![0f32; n]);
        let u = Buf::new(&api, &vec![0u64; n]);
        let sum = Buf::new(&api, &vec![0i32; n]);
        let lane = Buf::new(&api, &vec![0i32; n]);
        let below = Buf::new(&api, &vec![0u64; n]);
        let args = [f.arg(), u.arg(), sum.arg(), lane.arg(), below.arg()];
        launch(
            &api,
            "emu_wave_helpers",
            dims((1, 1, 1), (n as u32, 1, 1), 0),
            &args,
        )
        .unwrap();
        let (fv, uv): (Vec<f32>, Vec<u64>) = (f.read(n), u.read(n));
        let (sv, lv): (Vec<i32>, Vec<i32>) = (sum.read(n), lane.read(n));
        let bv: Vec<u64> = below.read(n);
        for t in 0..n {
            let (base, l) = (t / w * w, t % w);
            assert_eq!(
                fv[t],
                0.5 + (base + (l + 1) % w) as f32,
                "{}: qsa_shfl(float) t {t}",
                c.name
            );
            let src = if l + 1 < w { t + 1 } else { t } as u64;
            assert_eq!(
                uv[t],
                (src << 40) | src,
                "{}: qsa_shfl_down(u64) t {t}",
                c.name
            );
            let wave_sum: usize = (base..base + w).sum();
            assert_eq!(sv[t], wave_sum as i32, "{}: qsa_wave_sum t {t}", c.name);
            assert_eq!(lv[t], l as i32, "{}: qsa_lane t {t}", c.name);
            assert_eq!(bv[t], (1u64 << l) - 1, "{}: qsa_lanes_below t {t}", c.name);
        }
    }
}

#[test]
fn votes_ballot_any_all() {
    for c in targets() {
        let api = EmuApi::new(&c, Schedule::Forward).unwrap();
        let w = c.wave as usize;
        let n = 3 * w;
        // wave 0: every third lane; wave 1: none; wave 2: all.
        let pred: Vec<i32> = (0..n)
            .map(|t| match t / w {
                0 => (t % 3 == 0) as i32,
                1 => 0,
                _ => 7,
            })
            .collect();
        let p = Buf::new(&api, &pred);
        let ballot = Buf::new(&api, &vec![0u64; n]);
        let any = Buf::new(&api, &vec![9i32; n]);
        let all = Buf::new(&api, &vec![9i32; n]);
        let popc = Buf::new(&api, &vec![0i32; n]);
        let args = [p.arg(), ballot.arg(), any.arg(), all.arg(), popc.arg()];
        launch(
            &api,
            "emu_votes",
            dims((1, 1, 1), (n as u32, 1, 1), 0),
            &args,
        )
        .unwrap();
        let (bv, av, lv, pv): (Vec<u64>, Vec<i32>, Vec<i32>, Vec<i32>) =
            (ballot.read(n), any.read(n), all.read(n), popc.read(n));
        for t in 0..n {
            let base = t / w * w;
            let mask = (0..w)
                .filter(|&l| pred[base + l] != 0)
                .fold(0u64, |m, l| m | 1 << l);
            assert_eq!(bv[t], mask, "{}: ballot t {t}", c.name);
            assert_eq!(
                pv[t],
                mask.count_ones() as i32,
                "{}: popc(ballot) t {t}",
                c.name
            );
            assert_eq!(av[t], (mask != 0) as i32, "{}: any t {t}", c.name);
            assert_eq!(
                lv[t],
                (mask.count_ones() as usize == w) as i32,
                "{}: all t {t}",
                c.name
            );
        }
    }
}

#[test]
fn atomics_under_contention() {
    for c in targets() {
        let api = EmuApi::new(&c, Schedule::Random(11))
            .unwrap()
            .with_workers(4);
        let (blocks, threads) = (16u32, 256u32);
        let total = (blocks * threads) as u64;
        let g = Buf::new(&api, &[0u32, 0, u32::MAX, 0, 0, 0, i32::MAX as u32]);
        let gf = Buf::new(&api, &[0f32]);
        launch(
            &api,
            "emu_atomics",
            dims((blocks, 1, 1), (threads, 1, 1), 0),
            &[g.arg(), gf.arg()],
        )
        .unwrap();
        let v: Vec<u32> = g.read(7);
        let ids = 0..total;
        let min_mod = ids.clone().map(|i| i * 7 % 1009).min().unwrap() as u32;
        assert_eq!(
            v[0], total as u32,
            "{}: atomicAdd count (lost updates?)",
            c.name
        );
        assert_eq!(v[1], total as u32 - 1, "{}: atomicMax", c.name);
        assert_eq!(v[2], 5, "{}: atomicMin", c.name);
        assert_eq!(v[3], u32::MAX, "{}: atomicOr", c.name);
        assert_eq!(
            v[4],
            2 * total as u32,
            "{}: atomicCAS loop (lost updates?)",
            c.name
        );
        assert_eq!(
            v[5] as u64,
            ids.sum::<u64>(),
            "{}: shared atomicAdd then global",
            c.name
        );
        assert_eq!(v[6], min_mod, "{}: shared atomicMin then global", c.name);
        assert_eq!(
            gf.read::<f32>(1)[0],
            0.5 * total as f32,
            "{}: float atomicAdd",
            c.name
        );
    }
}

#[test]
fn barrier_orders_shared_memory_under_every_schedule() {
    for c in targets() {
        for s in Schedule::RACE_CHECK {
            let api = EmuApi::new(&c, s).unwrap();
            let n = 256usize;
            let out = Buf::new(&api, &vec![0i32; 2 * n]);
            launch(
                &api,
                "emu_barrier",
                dims((2, 1, 1), (n as u32, 1, 1), 0),
                &[out.arg()],
            )
            .unwrap();
            let v: Vec<i32> = out.read(2 * n);
            for (t, &got) in v.iter().enumerate() {
                assert_eq!(
                    got,
                    3 * ((t % n + 1) % n) as i32 + 1,
                    "{} {}: __syncthreads t {t}",
                    c.name,
                    s.name()
                );
            }
        }
    }
}

/// Run `kernel` under each race-check schedule; the race check's verdict.
fn race_check(c: &TargetCaps, kernel: &str) -> Result<(), String> {
    let runs: Vec<_> = Schedule::RACE_CHECK
        .iter()
        .map(|&s| {
            let api = EmuApi::new(c, s).unwrap().with_workers(1);
            let out = Buf::new(&api, &vec![0i32; 128]);
            launch(&api, kernel, dims((1, 1, 1), (128, 1, 1), 0), &[out.arg()]).unwrap();
            (s, api.records())
        })
        .collect();
    for r in &runs[1..] {
        race::compare(&c.name, (runs[0].0, &runs[0].1), (r.0, &r.1))?;
    }
    Ok(())
}

#[test]
fn race_check_fails_a_missing_barrier_and_names_the_kernel() {
    for c in targets() {
        race_check(&c, "emu_barrier")
            .unwrap_or_else(|e| panic!("{}: a correct kernel failed the race check: {e}", c.name));
        let err = race_check(&c, "emu_missing_barrier").expect_err(
            "the race check did not catch the planted missing __syncthreads in emu_missing_barrier",
        );
        assert!(
            err.contains("race in emu_missing_barrier") && err.contains(&c.name),
            "message: {err}"
        );
    }
}

#[test]
fn dynamic_shared_memory_and_its_limit() {
    for c in targets() {
        let api = EmuApi::new(&c, Schedule::Forward).unwrap();
        let n = 8192usize; // 32 KiB
        let out = Buf::new(&api, &vec![0f32; n]);
        let args = [out.arg(), Arg::I32(n as i32)];
        launch(
            &api,
            "emu_dynamic",
            dims((1, 1, 1), (256, 1, 1), 4 * n as u32),
            &args,
        )
        .unwrap();
        let v: Vec<f32> = out.read(n);
        assert!(
            v.iter().enumerate().all(|(i, &x)| x == (n - 1 - i) as f32),
            "{}: dynamic shared",
            c.name
        );
        let too_much = c.shared_per_block + 4;
        let err = launch(
            &api,
            "emu_dynamic",
            dims((1, 1, 1), (256, 1, 1), too_much),
            &args,
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("emu_dynamic")
                && msg.contains(&format!("{} allows {}", c.name, c.shared_per_block)),
            "{msg}"
        );
    }
}

#[test]
fn static_shared_memory_counts_against_the_target() {
    // 48 KiB in emu_big_static's body, plus the 1 KiB of emu_helper_shared (a device
    // function's __shared__, counted for every kernel).
    let small = caps("small_lds", Vendor::Amd, 64, 32 * 1024);
    let api = EmuApi::new(&small, Schedule::Forward).unwrap();
    let out = Buf::new(&api, &vec![0i32; 64]);
    let err = launch(
        &api,
        "emu_big_static",
        dims((1, 1, 1), (64, 1, 1), 0),
        &[out.arg()],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("emu_big_static uses 50176 bytes of static"),
        "{err}"
    );
    let big = caps("gfx906", Vendor::Amd, 64, 65_536);
    let api = EmuApi::new(&big, Schedule::Forward).unwrap();
    let out = Buf::new(&api, &vec![0i32; 64]);
    launch(
        &api,
        "emu_big_static",
        dims((1, 1, 1), (64, 1, 1), 0),
        &[out.arg()],
    )
    .unwrap();
}

#[test]
fn divergence_and_exited_lanes_are_errors_not_hangs() {
    for c in targets() {
        let api = EmuApi::new(&c, Schedule::Forward).unwrap();
        let out = Buf::new(&api, &vec![0i32; 128]);
        let d = dims((1, 1, 1), (128, 1, 1), 0);
        let err = launch(&api, "emu_divergent", d, &[out.arg()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("emu_divergent") && err.contains("deadlock"),
            "{err}"
        );
        let err = launch(&api, "emu_exited_lane", d, &[out.arg()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("emu_exited_lane") && err.contains("has exited"),
            "{err}"
        );
    }
}

#[test]
fn arguments_are_checked_against_the_signature() {
    let c = &targets()[0];
    let api = EmuApi::new(c, Schedule::Forward).unwrap();
    let out = Buf::new(&api, &vec![0i32; 64]);
    let err = launch(
        &api,
        "emu_shuffles",
        dims((1, 1, 1), (32, 1, 1), 0),
        &[out.arg(), Arg::I32(1)],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("emu_shuffles takes (pii) but the launch passes (pi)"),
        "{err}"
    );
}

#[test]
fn shared_memory_of_device_functions_counts_for_every_kernel() {
    let c = &targets()[2];
    let target = qsa::emu::EmuTarget::from_caps(c).unwrap();
    let m = qsa::emu::load(&qsa::emu::default_kernels_dir(), &source(), &target).unwrap();
    assert_eq!(m.static_shared("emu_helper_user"), Some(1024));
    assert_eq!(m.static_shared("emu_barrier"), Some(4096 + 1024));
    let api = EmuApi::new(c, Schedule::Reverse).unwrap();
    let out = Buf::new(&api, &vec![0i32; 256]);
    launch(
        &api,
        "emu_helper_user",
        dims((1, 1, 1), (256, 1, 1), 0),
        &[out.arg()],
    )
    .unwrap();
    let v: Vec<i32> = out.read(256);
    assert!(
        v.iter()
            .enumerate()
            .all(|(t, &x)| x == ((t + 1) % 256) as i32),
        "{v:?}"
    );
}

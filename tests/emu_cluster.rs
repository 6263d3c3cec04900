//! Emulated thread-block clusters (sm_90; kernels/common/emu_cluster.h, emu_blocks.h
//! `run_cluster`) through tests/emu/cluster.cu: blocks of a cluster exchange values through
//! qsa_cluster_map after qsa_cluster_sync; the expected values are written from cluster.h's
//! contract (rank = blockIdx.x mod the cluster size; a barrier over every thread of every
//! block; the map reads the named block's copy), not from the emulator's code. Misuses are
//! errors naming kernel and block, never hangs.

mod emu_probe;

use qsa::dispatch::TargetCaps;
use qsa::emu::api::EmuApi;
use qsa::emu::{race, Schedule};
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, DevPtr, GpuApi, LaunchDims};
use std::path::PathBuf;

const CLUSTER: usize = 4;

fn sm_90() -> TargetCaps {
    emu_probe::sm_90(4)
}

fn source() -> PathBuf {
    emu_probe::source("cluster.cu")
}

fn dims(grid: (u32, u32), threads: u32) -> LaunchDims {
    LaunchDims {
        grid: (grid.0, grid.1, 1),
        block: (threads, 1, 1),
        shared_bytes: 0,
    }
}

fn alloc(api: &EmuApi, n: usize) -> DevPtr {
    let p = api.alloc(4 * n).unwrap();
    api.upload(p, as_bytes(&vec![-1i32; n])).unwrap();
    p
}

fn read(api: &EmuApi, p: DevPtr, n: usize) -> Vec<i32> {
    let mut v = vec![0i32; n];
    api.download(p, as_bytes_mut(&mut v)).unwrap();
    v
}

/// Run `kernel` over `grid` x `threads`; its output (`n` ints) or the launch's error.
fn run(
    schedule: Schedule,
    workers: usize,
    kernel: &str,
    grid: (u32, u32),
    threads: u32,
    n: usize,
) -> Result<Vec<i32>, String> {
    let api = EmuApi::new(&sm_90(), schedule)
        .unwrap()
        .with_workers(workers);
    let out = alloc(&api, n);
    api.launch_source(&source(), kernel, dims(grid, threads), &[Arg::Ptr(out)])
        .map_err(|e| e.to_string())?;
    Ok(read(&api, out, n))
}

/// emu_cluster_exchange's output for thread t of block (x, y), from the kernel's comment.
fn expected_exchange(grid: (usize, usize), n: usize) -> Vec<i32> {
    let block = |x: usize, y: usize| x + grid.0 * y;
    let value = |b: usize, t: usize| (1000 * (b + 1) + t) as i32;
    let sum = |x: usize, y: usize, t: usize| {
        let base = x - x % CLUSTER;
        (0..CLUSTER).fold(0i32, |s, r| 7 * s + value(block(base + r, y), (t + r) % n))
    };
    let mut out = vec![0i32; 3 * grid.0 * grid.1 * n];
    for y in 0..grid.1 {
        for x in 0..grid.0 {
            let rank = x % CLUSTER;
            let next = x - rank + (rank + 1) % CLUSTER;
            for t in 0..n {
                let o = 3 * (block(x, y) * n + t);
                out[o] = rank as i32;
                out[o + 1] = sum(x, y, t);
                out[o + 2] = -sum(next, y, t);
            }
        }
    }
    out
}

/// Blocks of a cluster read each other's shared memory after the barrier: two clusters along
/// x, two rows, 64 threads, under every schedule and with one or two OS threads. A map that
/// returns the own block's copy, or a barrier that lets a block run on before the others
/// arrive, gives other sums (both planted: mutants/emu-cluster-*.yaml).
#[test]
fn cluster_blocks_exchange_shared_memory_through_the_map() {
    let (grid, n) = ((2 * CLUSTER, 2), 64);
    let want = expected_exchange(grid, n);
    for schedule in Schedule::RACE_CHECK {
        for workers in [1, 2] {
            let got = run(
                schedule,
                workers,
                "emu_cluster_exchange",
                (grid.0 as u32, grid.1 as u32),
                n as u32,
                want.len(),
            )
            .unwrap();
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                let (b, t, field) = (i / 3 / n, i / 3 % n, ["rank", "sum", "next"][i % 3]);
                panic!(
                    "emulated cluster exchange wrong under {} with {workers} workers: block {b} thread {t}: {field} = {}, expected {} (the cluster barrier or qsa_cluster_map does not follow cluster.h's contract)",
                    schedule.name(),
                    got[i],
                    want[i]
                );
            }
        }
    }
}

/// The module knows each kernel's cluster size (read from QSA_CLUSTER_DIMS by
/// src/emu/compile.rs), and a grid that is not whole clusters is refused before it runs.
#[test]
fn cluster_size_is_read_and_the_grid_must_hold_whole_clusters() {
    let target = qsa::emu::EmuTarget::from_caps(&sm_90()).unwrap();
    let m = qsa::emu::load(&qsa::emu::default_kernels_dir(), &source(), &target).unwrap();
    assert_eq!(m.cluster_size("emu_cluster_exchange"), Some(CLUSTER as u32));
    let e = run(
        Schedule::Forward,
        1,
        "emu_cluster_exchange",
        (6, 1),
        32,
        3 * 6 * 32,
    )
    .unwrap_err();
    assert!(
        e.contains("emu_cluster_exchange: grid x 6 is not a multiple of its cluster size 4"),
        "{e}"
    );
}

/// A remote read that no barrier orders against the neighbour's overwrite: the schedules'
/// different block orders give different memory, and the race check names the kernel.
#[test]
fn an_unordered_remote_read_is_a_race_between_schedules() {
    let records: Vec<_> = [Schedule::Forward, Schedule::Reverse]
        .into_iter()
        .map(|s| {
            let api = EmuApi::new(&sm_90(), s).unwrap().with_workers(1);
            let out = alloc(&api, 4 * 32);
            api.launch_source(
                &source(),
                "emu_cluster_race",
                dims((4, 1), 32),
                &[Arg::Ptr(out)],
            )
            .unwrap();
            (s, api.records())
        })
        .collect();
    let e = race::compare(
        "sm_90",
        (records[0].0, &records[0].1),
        (records[1].0, &records[1].1),
    )
    .unwrap_err();
    assert!(e.contains("race in emu_cluster_race on sm_90"), "{e}");
}

/// A block that exits after the last barrier stays readable until its cluster ends, under
/// every schedule (rank 0 of each cluster writes nothing; the others read rank 0's values).
#[test]
fn an_exited_block_stays_readable_until_its_cluster_ends() {
    let (blocks, n) = (2 * CLUSTER, 32);
    for schedule in Schedule::RACE_CHECK {
        let got = run(
            schedule,
            1,
            "emu_cluster_read_after_exit",
            (blocks as u32, 1),
            n as u32,
            blocks * n,
        )
        .unwrap();
        for b in 0..blocks {
            for t in 0..n {
                let rank0 = b - b % CLUSTER;
                let want = if b % CLUSTER == 0 {
                    -1
                } else {
                    (rank0 * 100 + t) as i32
                };
                assert_eq!(
                    got[b * n + t],
                    want,
                    "{}: block {b} thread {t} read of an exited block's shared memory",
                    schedule.name()
                );
            }
        }
    }
}

/// Misuses of the cluster barrier are errors naming kernel and block, never a hang.
#[test]
fn cluster_barrier_misuse_names_kernel_and_block() {
    let cases = [
        (
            "emu_cluster_divergent",
            "emu_cluster_divergent, block (0,0,0): 63 threads wait at qsa_cluster_sync while 1 wait at __syncthreads",
        ),
        (
            "emu_cluster_threads_exit",
            "emu_cluster_threads_exit, block (0,0,0): 32 of 64 threads exited while the others wait at qsa_cluster_sync",
        ),
        (
            "emu_cluster_block_exits",
            "emu_cluster_block_exits, block (3,0,0): waits at qsa_cluster_sync while block (1,0,0) of its cluster exited",
        ),
    ];
    for (kernel, want) in cases {
        let e = run(Schedule::Forward, 1, kernel, (4, 1), 64, 64).unwrap_err();
        assert!(e.contains(want), "{kernel}: {e}");
    }
}

/// Clusters hold every fiber of every block at once (4 x 1,024 here), and each fiber stack
/// has a guard page: 16 OS threads of such clusters would map 131,072 areas, past Linux's
/// default vm.max_map_count (65,530), and fail to map their stacks. The runtime takes fewer
/// workers instead (emu_blocks.h FIBER_BUDGET), with the same results.
#[test]
fn many_workers_of_large_clusters_stay_within_the_map_limit() {
    let (grid, n) = ((16 * CLUSTER, 1), 1024);
    let want = expected_exchange(grid, n);
    let got = run(
        Schedule::Forward,
        16,
        "emu_cluster_exchange",
        (grid.0 as u32, grid.1 as u32),
        n as u32,
        want.len(),
    )
    .unwrap_or_else(|e| panic!("16 workers of 4 x 1,024-thread clusters: {e}"));
    assert!(got == want, "16 workers: wrong exchange");
}

//! The tensor-core and matrix-core scorers of kernels/block_scores.cu, run by the emulator
//! on its matrix primitives (kernels/common/emu_mma.h): TF32 and BF16 mma.sync (wide and
//! decode tiles) on sm_90, WMMA on gfx1201, MFMA on gfx950. Each against an FP64
//! reference on the inputs rounded as the kernel rounds them, launched with the host code's
//! own plan (qsa::gpu::scores::plan), so a wrong fragment layout, a lost k chunk or a
//! misplaced row shows up as an O(1) error while only the f32 summation order is allowed.
//! The primitives themselves are tested in tests/emu_mma.rs.

use half::bf16;
use qsa::dispatch::scores::{AmdMatrix, ScoresKernel, TcEngine};
use qsa::dispatch::Switches;
use qsa::dispatch::{TargetCaps, Vendor};
use qsa::emu::api::EmuApi;
use qsa::emu::Schedule;
use qsa::gpu::scores::plan_on;
use qsa::gpu::{as_bytes, as_bytes_mut, Arg, GpuApi, LaunchDims};
use std::path::PathBuf;

const D: usize = 128;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The emulator caches a module by the hash of the source it builds and the common headers;
/// the probes include kernels/block_scores.cu, which that hash does not see, so the cache
/// directory is keyed by block_scores.cu's text (a changed kernel is rebuilt, not reused).
fn use_cache_keyed_by_block_scores() {
    use std::hash::{Hash, Hasher};
    let text = std::fs::read_to_string(root().join("kernels/block_scores.cu")).unwrap();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    let dir = root().join(format!("target/emu/scores-probe-{:016x}", h.finish()));
    std::env::set_var("QSA_EMU_CACHE", dir);
}

fn caps(name: &str, vendor: Vendor, wave: u32, shared: u32) -> TargetCaps {
    TargetCaps {
        name: name.into(),
        vendor,
        wave,
        shared_per_block: shared,
        multiprocessors: 2,
        features: vec![],
    }
}

/// Values in [-1, 1) from a 64-bit LCG (deterministic, no RNG crate).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// cvt.rna.tf32.f32 by its definition (nearest of 10 fraction bits, ties away), in f64.
fn tf32(x: f32) -> f64 {
    let a = (x as f64).abs();
    if a == 0.0 {
        return 0.0;
    }
    let ulp = 2f64.powi((a.log2().floor() as i32).max(-126) - 10);
    let q = a / ulp;
    let r = if q - q.floor() >= 0.5 {
        q.floor() + 1.0
    } else {
        q.floor()
    };
    (r * ulp).copysign(x as f64)
}

/// S[q][b] = sum_h w[q][h] relu(Q[q][h] . K[b]) over rounded Q and K, in f64, and the scale
/// sum_h |w| |Q . K| that bounds the f32 rounding of the kernel's sums.
fn reference(
    q: &[f32],
    kb: &[f32],
    w: &[f32],
    shape: (usize, usize, usize),
    round: fn(f32) -> f64,
) -> (Vec<f64>, Vec<f64>) {
    let (nq, heads, blocks) = shape;
    let (mut s, mut scale) = (vec![0.0; nq * blocks], vec![0.0; nq * blocks]);
    for qq in 0..nq {
        for b in 0..blocks {
            for h in 0..heads {
                let row = &q[(qq * heads + h) * D..][..D];
                let dot: f64 = (0..D).map(|k| round(row[k]) * round(kb[b * D + k])).sum();
                let wv = w[qq * heads + h] as f64;
                s[qq * blocks + b] += wv * dot.max(0.0);
                scale[qq * blocks + b] += wv.abs() * dot.abs();
            }
        }
    }
    (s, scale)
}

fn run_scorer(c: &TargetCaps, kernel: ScoresKernel, shape: (usize, usize, usize)) {
    run_scorer_on(c, kernel, TcEngine::MmaSync, shape)
}

fn run_scorer_on(
    c: &TargetCaps,
    kernel: ScoresKernel,
    engine: TcEngine,
    shape: (usize, usize, usize),
) {
    run_scorer_planned(c, kernel, engine, shape, None)
}

fn run_scorer_planned(
    c: &TargetCaps,
    kernel: ScoresKernel,
    engine: TcEngine,
    shape: (usize, usize, usize),
    plan_shared: Option<u32>,
) {
    let sw = Switches::default();
    run_scorer_switched(
        c,
        kernel,
        engine,
        shape,
        plan_shared,
        &sw,
        Schedule::Forward,
    )
}

/// The `QSA_SCORES_WG=rs*` kernels, by their index in tests/emu/scores_tc_nvidia.cu's
/// `scores_tc_wgrs`.
const WGRS: [&str; 8] = [
    "wgrs128",
    "wgrs128p",
    "wgrs256",
    "wgrs256p",
    "wgrs128s",
    "wgrs256s",
    "wgrs256ps",
    "wgrs256o",
];

/// Runs `kernel` planned for `c` (or for `plan_shared` bytes per block, when given) with the
/// switches `sw` (`plan_on` on one multiprocessor), under `schedule`.
fn run_scorer_switched(
    c: &TargetCaps,
    kernel: ScoresKernel,
    engine: TcEngine,
    shape: (usize, usize, usize),
    plan_shared: Option<u32>,
    sw: &Switches,
    schedule: Schedule,
) {
    let (nq, heads, blocks) = shape;
    use_cache_keyed_by_block_scores();
    let api = EmuApi::new(c, schedule).unwrap();
    let (q, kb, w) = (
        values(nq * heads * D, 1),
        values(blocks * D, 2),
        values(nq * heads, 3),
    );
    let buf = |v: &[f32]| {
        let p = api.alloc(v.len() * 4).unwrap();
        api.upload(p, as_bytes(v)).unwrap();
        p
    };
    let (pq, pk, pw, ps) = (
        buf(&q),
        buf(&kb),
        buf(&w),
        buf(&vec![f32::NAN; nq * blocks]),
    );
    let tile = qsa::dispatch::scores::tc_tile(nq, heads);
    let limit = plan_shared.unwrap_or(c.shared_per_block);
    let l = plan_on(kernel, tile, engine, (nq, heads, blocks), limit, 1, sw).unwrap();
    let dims = LaunchDims {
        grid: l.grid,
        block: (l.block, 1, 1),
        shared_bytes: l.shared_bytes,
    };
    // tests/emu/scores_*.cu forward to the kernel the plan names (see there why).
    let (probe, entry) = match (kernel, l.kernel.ends_with("_decode")) {
        (ScoresKernel::AmdMatrixBf16(_), _) => ("scores_amd_matrix.cu", "scores_amd_matrix"),
        _ if l.kernel.ends_with("_decode_wg") => ("scores_tc_nvidia.cu", "scores_tc_decode_wg"),
        _ if l.kernel.contains("_decode_wgc") => ("scores_tc_nvidia.cu", "scores_tc_decode_wgc"),
        _ if l.kernel.ends_with("_wgmma") => ("scores_tc_nvidia.cu", "scores_tc_wgmma"),
        _ if l.kernel.contains("_wgrs") => ("scores_tc_nvidia.cu", "scores_tc_wgrs"),
        (_, false) => ("scores_tc_nvidia.cu", "scores_tc_wide"),
        (_, true) => ("scores_tc_nvidia.cu", "scores_tc_decode"),
    };
    let mut args = vec![
        Arg::Ptr(pq),
        Arg::Ptr(pk),
        Arg::Ptr(pw),
        Arg::Ptr(ps),
        Arg::I32(nq as i32),
        Arg::I32(heads as i32),
        Arg::I32(blocks as i32),
    ];
    if !matches!(kernel, ScoresKernel::AmdMatrixBf16(_)) {
        args.push(Arg::I32((kernel == ScoresKernel::Bf16) as i32));
    }
    if let Some(i) = WGRS.iter().position(|k| l.kernel.ends_with(k)) {
        args.push(Arg::I32(i as i32));
    }
    if l.kernel.contains("_decode_wgc") {
        args.push(Arg::I32(l.kernel.ends_with("_wgc2") as i32));
    }
    // The decode kernels' ring depth.
    args.extend(l.extra_args.iter().map(|&a| Arg::I32(a)));
    api.launch_source(&root().join("tests/emu").join(probe), entry, dims, &args)
        .unwrap_or_else(|e| panic!("{}: {}: {e}", c.name, l.kernel));
    let mut s = vec![0f32; nq * blocks];
    api.download(ps, as_bytes_mut(&mut s)).unwrap();
    let round: fn(f32) -> f64 = match kernel {
        ScoresKernel::Tf32 => tf32,
        _ => |x| bf16::from_f32(x).to_f64(),
    };
    let (want, scale) = reference(&q, &kb, &w, shape, round);
    for (i, (&got, (&want, &scale))) in s.iter().zip(want.iter().zip(&scale)).enumerate() {
        // Only the kernels' f32 sums differ from the reference: measured worst 8.7e-8 of the
        // scale on these shapes (2026-12-01, this 2-core machine, printed with --nocapture);
        // 1e-5 leaves room for other shapes, far below the O(1) of a layout error.
        let tol = 1e-5 * scale + 1e-30;
        assert!(
            (got as f64 - want).abs() <= tol,
            "{} {} {:?}: S[query {}][block {}] = {got}, FP64 reference {want} (tolerance {tol:.3e})",
            c.name,
            l.kernel,
            shape,
            i / blocks,
            i % blocks
        );
    }
    let worst = s
        .iter()
        .zip(want.iter().zip(&scale))
        .map(|(&g, (&w, &sc))| (g as f64 - w).abs() / sc.max(1e-30))
        .fold(0f64, f64::max);
    println!(
        "{} {} {shape:?}: worst |S - ref| / scale = {worst:.2e}",
        c.name, l.kernel
    );
}

/// Ragged shapes: heads past one m-tile, blocks past one CTA tile. The decode kernels (the
/// first three: 2 queries x 2 m-tiles; 1 query x 64 heads; one query of 3 m-tiles and a
/// zero one) are planned for one multiprocessor (`plan`), so the persistent CTAs walk
/// several tiles each, the last one partial; 3 queries of 20 heads (2 CTA rows) and heads
/// past 64 take the wide tile.
const SHAPES: [(usize, usize, usize); 5] = [
    (2, 20, 300),
    (1, 64, 270),
    (1, 40, 100),
    (3, 20, 300),
    (3, 80, 130),
];

#[test]
fn nvidia_tensor_core_scorers_on_emulated_mma() {
    // sm_86 compiles the same tensor-core scorer code (__CUDA_ARCH__ >= 800); only sm_90's
    // shared memory holds the forwarding module's static + dynamic total (the emulator counts
    // every static __shared__ of a module against each of its kernels).
    let c = caps("sm_90", Vendor::Nvidia, 32, 232_448);
    for kernel in [ScoresKernel::Tf32, ScoresKernel::Bf16] {
        for shape in SHAPES {
            run_scorer(&c, kernel, shape);
        }
        // The decode kernels as sm_86's 99 KiB plans them: 4 warps (128-block tiles), 3
        // stages, one CTA per SM (run with sm_90's limit, which the module's static shared
        // memory needs).
        run_scorer_planned(&c, kernel, TcEngine::MmaSync, SHAPES[1], Some(101_376));
    }
}

/// sm_90a's wgmma scorers (the wide tile's engine there): queries packed 4 / 2 / 1 per
/// 64-row unit (7, 20, 48 heads), two passes (80 heads), blocks past one CTA, units past one
/// CTA (9 queries of 7 heads: 3 units).
#[test]
fn nvidia_wgmma_scorers_on_emulated_wgmma() {
    let mut c = caps("sm_90", Vendor::Nvidia, 32, 232_448);
    c.features = vec![qsa::dispatch::Feature::Wgmma];
    for kernel in [ScoresKernel::Tf32, ScoresKernel::Bf16] {
        for shape in [
            (9, 7, 77),
            (3, 20, 300),
            (5, 48, 129),
            (2, 80, 270),
            (17, 16, 40),
        ] {
            // The SS kernels (the RS ones, sm_90's default, have the test below).
            let sw = Switches::from_pairs(&[("QSA_SCORES_WG", "ss")]);
            run_scorer_switched(&c, kernel, TcEngine::Wgmma, shape, None, &sw, WAVE_FIRST);
        }
    }
}

/// The wgmma scorers run one warp at a time, each warp's wgmma as soon as it issues it
/// (Schedule::WaveFirst): a wgmma reading shared memory that other warps stage without a
/// barrier in between reads poison and misses the reference.
const WAVE_FIRST: Schedule = Schedule::WaveFirst;

/// sm_90a's A-in-registers wgmma scorers (QSA_SCORES_WG=rs*, kernels/common/scores_wgrs.h):
/// heads in one partial tile (7), two (20), five (80) and 13 (200) head tiles; groups of 4
/// queries, the last partial (9, 17 queries); blocks past one B tile (270, 300); planned for
/// one SM (a wave's groups per warpgroup) or, every other shape, with QSA_SCORES_WG_UPC=1
/// (one group per warpgroup: more CTA rows; with 2 warpgroups per CTA an idle second one).
#[test]
fn nvidia_wgmma_rs_scorers_on_emulated_wgmma() {
    let mut c = caps("sm_90", Vendor::Nvidia, 32, 232_448);
    c.features = vec![qsa::dispatch::Feature::Wgmma];
    let shapes = [
        (9, 7, 77),
        (3, 20, 300),
        (2, 80, 270),
        (17, 16, 40),
        (1, 200, 9),
    ];
    for (kernel, wg) in [
        (ScoresKernel::Tf32, "rs128"),
        (ScoresKernel::Tf32, "rs128p"),
        (ScoresKernel::Tf32, "rs256"),
        (ScoresKernel::Bf16, "rs128"),
        (ScoresKernel::Bf16, "rs256"),
        (ScoresKernel::Bf16, "rs256p"),
        (ScoresKernel::Tf32, "rs128s"),
        (ScoresKernel::Tf32, "rs256s"),
        (ScoresKernel::Bf16, "rs128s"),
        (ScoresKernel::Bf16, "rs256ps"),
        (ScoresKernel::Tf32, "rs256o"),
        (ScoresKernel::Bf16, "rs256o"),
    ] {
        for (i, &shape) in shapes.iter().enumerate() {
            let mut kv = vec![("QSA_SCORES_WG", wg)];
            if i % 2 == 1 {
                kv.push(("QSA_SCORES_WG_UPC", "1"));
            }
            let sw = Switches::from_pairs(&kv);
            run_scorer_switched(&c, kernel, TcEngine::Wgmma, shape, None, &sw, WAVE_FIRST);
        }
    }
}

/// sm_90a's wgmma decode scorers (Kb tiles as register A, Q resident as B), planned for one
/// multiprocessor (two persistent CTAs walk the tiles of 64 blocks, the last partial): one
/// query of 64 heads, 4 queries of 7 heads (4 per CTA row), 2 of 20 (2 m-tiles each), one of
/// 40 (3 m-tiles); 10 tiles (5 per CTA). Two query groups (grid.y = 2): tests/emu_scores.rs.
#[test]
fn nvidia_wgmma_decode_scorers_on_emulated_wgmma() {
    let mut c = caps("sm_90", Vendor::Nvidia, 32, 232_448);
    c.features = vec![qsa::dispatch::Feature::Wgmma];
    // The register kernel: TF32's default is the TMA ring since session 9 (its forms are
    // checked in tests/emu_scores.rs), so the switch pins this kernel for both precisions.
    let regs = Switches::from_pairs(&[("QSA_SCORES_DECODE_WG_TMA", "off")]);
    let run = |kernel, shape| {
        run_scorer_switched(
            &c,
            kernel,
            TcEngine::Wgmma,
            shape,
            None,
            &regs,
            Schedule::Forward,
        )
    };
    for kernel in [ScoresKernel::Tf32, ScoresKernel::Bf16] {
        for shape in [(1, 64, 270), (4, 7, 77), (2, 20, 300), (1, 40, 100)] {
            run(kernel, shape);
        }
        // Ten tiles: five per CTA, the loop's odd exit.
        run(kernel, (1, 64, 600));
    }
}

/// The cp.async-ring twins (`QSA_SCORES_DECODE_WG_RING`, `_WG_GROUPS`, `QSA_SCORES_DECODE_GRID`)
/// against the FP64 reference: rings of 2, 3 and 4 tiles over up to 16 tiles per CTA (each
/// slot refilled several times), two warpgroups sharing Q (one of them with fewer tiles, or
/// none), an even grid, a partial last tile and 4 queries of 7 heads in one CTA row. (Deeper
/// rings exceed the emulator's 227 KiB with block_scores.cu's 50,688 B of static shared
/// memory, which it charges to every kernel of the source.)
#[test]
fn nvidia_wgmma_decode_ring_scorers_on_emulated_wgmma() {
    let mut c = caps("sm_90", Vendor::Nvidia, 32, 232_448);
    c.features = vec![qsa::dispatch::Feature::Wgmma];
    let configs: [&[(&str, &str)]; 4] = [
        &[("QSA_SCORES_DECODE_WG_RING", "2")],
        &[("QSA_SCORES_DECODE_WG_RING", "4")],
        &[
            ("QSA_SCORES_DECODE_WG_RING", "3"),
            ("QSA_SCORES_DECODE_GRID", "even"),
        ],
        &[
            ("QSA_SCORES_DECODE_WG_RING", "2"),
            ("QSA_SCORES_DECODE_WG_GROUPS", "2"),
        ],
    ];
    for kernel in [ScoresKernel::Tf32, ScoresKernel::Bf16] {
        for kv in configs {
            let sw = Switches::from_pairs(kv);
            for shape in [(1, 64, 600), (4, 7, 77), (1, 40, 1000), (1, 64, 130)] {
                run_scorer_switched(
                    &c,
                    kernel,
                    TcEngine::Wgmma,
                    shape,
                    None,
                    &sw,
                    Schedule::Forward,
                );
            }
        }
    }
}

#[test]
fn amd_matrix_core_scorers_on_emulated_wmma_and_mfma() {
    let gfx1201 = caps("gfx1201", Vendor::Amd, 32, 65_536);
    let gfx950 = caps("gfx950", Vendor::Amd, 64, 163_840);
    for shape in SHAPES {
        run_scorer(
            &gfx1201,
            ScoresKernel::AmdMatrixBf16(AmdMatrix::Wmma),
            shape,
        );
        run_scorer(&gfx950, ScoresKernel::AmdMatrixBf16(AmdMatrix::Mfma), shape);
    }
}

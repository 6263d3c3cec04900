//! The launch (grid, block, shared memory) of each scores kernel for one shape: pure, so
//! it is unit-tested without a device. Launch rules mirror the header comments of
//! kernels/block_scores.cu and its common/scores_*.h bodies; the decode and
//! A-in-registers wgmma launches are in decode.rs and wgrs.rs.

use super::{decode, shape_err, to_u32, wgrs, ScoresLaunch, MAX_GRID_Y};
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::scores::{
    wg_kernel, wgmma_units_per_cta, AmdMatrix, ScoresKernel, SimtChunk, TcEngine, TcTile, WgKernel,
    WG_UPC_DEFAULT,
};
use crate::dispatch::Switches;
use crate::problem::HEAD_DIM;

/// Threads per block of every scores kernel but the wgmma ones (one warpgroup, `WG_THREADS`).
const THREADS: u32 = 256;
/// The wgmma kernels (kernels/common/scores_wgmma.h, `wg_body`): one warpgroup per CTA; BN blocks
/// per CTA (128 TF32, 256 BF16); 64-row units per CTA from grid.y (`with_wgmma_units`).
const WG_THREADS: u32 = 128;
/// The SIMT kernels' CTA tile (SIMT_TQ x SIMT_TB in the source), the same for every d-chunk.
const SIMT_QUERIES: usize = 16;
const SIMT_BLOCKS: usize = 128;
/// Tensor-core kernels: K chunk rows are 36 floats in shared memory, 2 pipeline stages.
const TC_ROW_FLOATS: usize = 36;
const TC_STAGES: usize = 2;
/// AMD matrix-core kernels (AMC_NT, AMC_QPC in kernels/common/scores_amd_mc.h): n-tiles of
/// 16 blocks per wave (their B fragments stay in registers) and queries per CTA. A CTA of
/// 256 threads is 8 waves on gfx12 (wave32) and 4 on gfx950 (wave64).
const AMC_WMMA_NT: usize = 2;
const AMC_MFMA_NT: usize = 4;
const AMC_QPC: usize = 8;

/// Grid and shared memory of `kernel` for `nq x heads x blocks` (all >= 1), or the limit the
/// shape breaks; `tile` is the tensor-core kernels' CTA tile (`tc_tile_for`; the others
/// ignore it). The SIMT kernel is planned with the default d-chunk (`with_simt_chunk` swaps
/// it: same grid). Pure, so it is unit-tested without a device. TF32 / BF16 run on mma.sync
/// here; `plan_engine` plans either engine.
pub fn plan(
    kernel: ScoresKernel,
    tile: TcTile,
    nq: usize,
    heads: usize,
    blocks: usize,
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    plan_engine(
        kernel,
        tile,
        TcEngine::MmaSync,
        nq,
        heads,
        blocks,
        shared_limit,
    )
}

/// `plan` with the TF32 / BF16 kernels' engine (`tc_engine`); other kernels ignore it. The
/// decode kernels get their default configuration for one multiprocessor (`plan_on`).
pub fn plan_engine(
    kernel: ScoresKernel,
    tile: TcTile,
    engine: TcEngine,
    nq: usize,
    heads: usize,
    blocks: usize,
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let sw = Switches::default();
    plan_on(
        kernel,
        tile,
        engine,
        (nq, heads, blocks),
        shared_limit,
        1,
        &sw,
    )
}

/// `plan_engine` on `multiprocessors` SMs with the call's switches: the decode tile's
/// kernels are persistent over the SMs and configured by `sw`
/// (`dispatch::scores::decode::config_for`). What the runner and `qsa plan` launch.
pub fn plan_on(
    kernel: ScoresKernel,
    tile: TcTile,
    engine: TcEngine,
    (nq, heads, blocks): (usize, usize, usize),
    shared_limit: u32,
    multiprocessors: u32,
    sw: &Switches,
) -> BackendResult<ScoresLaunch> {
    let too_big = |v: usize, name: &str| {
        if v > i32::MAX as usize {
            Err(shape_err(format!(
                "{name} = {v} exceeds the kernels' int32 argument"
            )))
        } else {
            Ok(())
        }
    };
    too_big(nq, "nq")?;
    too_big(heads, "heads")?;
    too_big(blocks, "blocks")?;
    match kernel {
        ScoresKernel::Warp => {
            let groups = nq
                .checked_mul(blocks)
                .ok_or_else(|| shape_err("nq * blocks overflows".into()))?;
            let grid = groups.div_ceil(THREADS as usize / 32);
            if grid > i32::MAX as usize {
                return Err(shape_err(format!(
                    "warp kernel: nq * blocks = {groups} needs {grid} CTAs (> 2^31 - 1); split the queries"
                )));
            }
            Ok(ScoresLaunch {
                kernel: "block_scores_warp",
                variant: kernel.name().into(),
                grid: (to_u32(grid, "grid.x")?, 1, 1),
                block: THREADS,
                shared_bytes: 0,
                extra_args: Vec::new(),
            })
        }
        ScoresKernel::Simt => {
            // The kernel's block indices are ints up to blocks + SIMT_BLOCKS - 1.
            if blocks > i32::MAX as usize - SIMT_BLOCKS {
                return Err(shape_err(format!(
                    "simt kernel: blocks = {blocks} exceeds 2^31 - 1 - {SIMT_BLOCKS}; split the blocks"
                )));
            }
            let gy = nq.div_ceil(SIMT_QUERIES);
            if gy > MAX_GRID_Y {
                return Err(shape_err(format!(
                    "simt kernel: nq = {nq} needs grid.y = {gy} > {MAX_GRID_Y}; split the queries"
                )));
            }
            Ok(ScoresLaunch {
                kernel: SimtChunk::D8.kernel(),
                variant: kernel.name().into(),
                grid: (
                    to_u32(blocks.div_ceil(SIMT_BLOCKS), "grid.x")?,
                    gy as u32,
                    1,
                ),
                block: THREADS,
                shared_bytes: 0,
                extra_args: Vec::new(),
            })
        }
        ScoresKernel::AmdMatrixBf16(m) => {
            let (name, wave, nt) = match m {
                AmdMatrix::Wmma => ("block_scores_wmma_bf16", 32, AMC_WMMA_NT),
                AmdMatrix::Mfma => ("block_scores_mfma_bf16", 64, AMC_MFMA_NT),
            };
            let per_cta = (THREADS as usize / wave) * nt * 16;
            // The kernel's first block of a wave is an int up to blocks + per_cta - 1.
            if blocks > i32::MAX as usize - per_cta {
                return Err(shape_err(format!(
                    "{} kernel: blocks = {blocks} exceeds 2^31 - 1 - {per_cta}; split the blocks",
                    kernel.name()
                )));
            }
            let gy = nq.div_ceil(AMC_QPC);
            if gy > MAX_GRID_Y {
                return Err(shape_err(format!(
                    "{} kernel: nq = {nq} needs grid.y = {gy} > {MAX_GRID_Y}; split the queries",
                    kernel.name()
                )));
            }
            Ok(ScoresLaunch {
                kernel: name,
                variant: kernel.name().into(),
                grid: (to_u32(blocks.div_ceil(per_cta), "grid.x")?, gy as u32, 1),
                block: THREADS,
                shared_bytes: 0,
                extra_args: Vec::new(),
            })
        }
        ScoresKernel::Tf32 | ScoresKernel::Bf16
            if tile == TcTile::Decode && engine == TcEngine::Wgmma =>
        {
            let bf16 = kernel == ScoresKernel::Bf16;
            let cfg = crate::dispatch::scores::decode_wg::config_for(sw, bf16)
                .map_err(BackendError::Unsupported)?;
            let sms = multiprocessors as usize;
            decode::plan_decode_wg(kernel, &cfg, sms, (nq, heads, blocks), shared_limit)
        }
        ScoresKernel::Tf32 | ScoresKernel::Bf16 if tile == TcTile::Decode => {
            let cfg = crate::dispatch::scores::decode::config_for(sw, shared_limit)
                .map_err(BackendError::Unsupported)?;
            let sms = multiprocessors as usize;
            decode::plan_decode(kernel, &cfg, sms, (nq, heads, blocks), shared_limit)
        }
        ScoresKernel::Tf32 | ScoresKernel::Bf16 if engine == TcEngine::Wgmma => {
            let bf16 = kernel == ScoresKernel::Bf16;
            match wg_kernel(sw, bf16) {
                WgKernel::Ss => plan_wgmma(bf16, (nq, heads, blocks), WG_UPC_DEFAULT, shared_limit),
                WgKernel::Rs {
                    bn,
                    prefetch,
                    swizzle,
                    pingpong,
                } => wgrs::plan_wgrs(
                    bf16,
                    wgrs::RsFlags {
                        bn,
                        prefetch,
                        swizzle,
                        pingpong,
                    },
                    (nq, heads, blocks),
                    multiprocessors as usize,
                    wgmma_units_per_cta(sw),
                    shared_limit,
                ),
            }
        }
        ScoresKernel::Tf32 | ScoresKernel::Bf16 => {
            // The kernel addresses Q with 32-bit offsets.
            let q_floats = nq * heads * HEAD_DIM;
            if q_floats > i32::MAX as usize {
                return Err(shape_err(format!(
                    "{} kernel: nq * heads * 128 = {q_floats} exceeds 2^31 - 1 (32-bit offsets); split the queries",
                    kernel.name()
                )));
            }
            let mt = tile.m_tiles();
            let mtq = heads.div_ceil(16);
            let qpc = if mtq <= mt { mt / mtq } else { 1 };
            let gy = nq.div_ceil(qpc);
            if gy > MAX_GRID_Y {
                return Err(shape_err(format!(
                    "{} kernel: nq = {nq} needs grid.y = {gy} > {MAX_GRID_Y}; split the queries",
                    kernel.name()
                )));
            }
            let shared = TC_STAGES * (16 * mt + tile.blocks()) * TC_ROW_FLOATS * 4;
            if shared > shared_limit as usize {
                return Err(BackendError::Unsupported(format!(
                    "{} kernel needs {shared} B of shared memory per block, the target allows {shared_limit}",
                    kernel.name()
                )));
            }
            let (name, suffix) = match (kernel, tile) {
                (ScoresKernel::Tf32, TcTile::Wide) => ("block_scores_tf32", ""),
                (ScoresKernel::Tf32, TcTile::Decode) => ("block_scores_tf32_decode", "_decode"),
                (_, TcTile::Wide) => ("block_scores_bf16", ""),
                (_, TcTile::Decode) => ("block_scores_bf16_decode", "_decode"),
            };
            Ok(ScoresLaunch {
                kernel: name,
                variant: format!("{}{suffix}", kernel.name()),
                grid: (
                    to_u32(blocks.div_ceil(tile.blocks()), "grid.x")?,
                    gy as u32,
                    1,
                ),
                block: THREADS,
                shared_bytes: shared as u32,
                extra_args: Vec::new(),
            })
        }
    }
}

/// The wgmma kernels' launch (kernels/common/scores_wgmma.h, `wg_body`): each query's heads padded
/// to 16-row m-tiles (mtq), 4 / mtq queries per 64-row unit (one query, ceil(mtq / 4) passes,
/// above 64 heads), about `upc` units (the kernel derives its count from grid.y) and BN
/// blocks per CTA.
fn plan_wgmma(
    bf16: bool,
    (nq, heads, blocks): (usize, usize, usize),
    upc: usize,
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let (name, variant, bn, elem) = if bf16 {
        ("block_scores_bf16_wgmma", "bf16_wgmma", 256, 2)
    } else {
        ("block_scores_tf32_wgmma", "tf32_wgmma", 128, 4)
    };
    // The kernel's block indices are ints up to blocks + BN - 1.
    if blocks > i32::MAX as usize - bn {
        return Err(shape_err(format!(
            "{variant} kernel: blocks = {blocks} exceeds 2^31 - 1 - {bn}; split the blocks"
        )));
    }
    let mtq = heads.div_ceil(16);
    let qpu = if mtq <= 4 { 4 / mtq } else { 1 };
    let gy = nq.div_ceil(qpu).div_ceil(upc);
    if gy > MAX_GRID_Y {
        return Err(shape_err(format!(
            "{variant} kernel: nq = {nq} needs grid.y = {gy} > {MAX_GRID_Y}; split the queries"
        )));
    }
    let shared = (bn + 64) * HEAD_DIM * elem + 4 * bn * 4;
    if shared > shared_limit as usize {
        return Err(BackendError::Unsupported(format!(
            "{variant} kernel needs {shared} B of shared memory per block, the target allows {shared_limit}"
        )));
    }
    Ok(ScoresLaunch {
        kernel: name,
        variant: variant.into(),
        grid: (to_u32(blocks.div_ceil(bn), "grid.x")?, gy as u32, 1),
        block: WG_THREADS,
        shared_bytes: shared as u32,
        extra_args: Vec::new(),
    })
}

/// `l` with about `upc` units per CTA if it is a wgmma launch (grid.y recomputed, the rest
/// unchanged); any other launch unchanged.
pub fn with_wgmma_units(
    l: ScoresLaunch,
    upc: usize,
    (nq, heads, blocks): (usize, usize, usize),
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    match l.kernel {
        "block_scores_tf32_wgmma" => plan_wgmma(false, (nq, heads, blocks), upc, shared_limit),
        "block_scores_bf16_wgmma" => plan_wgmma(true, (nq, heads, blocks), upc, shared_limit),
        _ => Ok(l),
    }
}

/// `l` with the SIMT kernel of d-chunk `chunk` (the chunks share tile, grid and static
/// shared memory declared in the kernel); any other kernel's launch unchanged.
pub fn with_simt_chunk(mut l: ScoresLaunch, chunk: SimtChunk) -> ScoresLaunch {
    if l.kernel == SimtChunk::D8.kernel() {
        l.kernel = chunk.kernel();
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::scores::tc_tile;

    #[test]
    fn plans_match_the_kernel_tiles() {
        let l = plan(ScoresKernel::Tf32, tc_tile(256, 64), 256, 64, 4096, 232_448).unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.shared_bytes),
            ("block_scores_tf32", (32, 128, 1), 73_728)
        );
        let l = plan(ScoresKernel::Tf32, tc_tile(1, 64), 1, 64, 262_144, 232_448).unwrap();
        // The decode kernel: persistent, 3 CTAs of 4 warps per multiprocessor (`plan`: one).
        assert_eq!(
            (l.kernel, l.grid, l.block, l.shared_bytes, l.extra_args),
            ("block_scores_tf32_decode", (3, 1, 1), 128, 70_656, vec![2])
        );
        assert_eq!(l.variant, "tf32_decode");
        // sm_86's 99 KiB holds both tiles (the decode one with 4 warps, 3 stages).
        assert!(plan(ScoresKernel::Bf16, tc_tile(1, 64), 1, 64, 100, 101_376).is_ok());
        assert!(matches!(
            plan(ScoresKernel::Bf16, tc_tile(1, 64), 1, 64, 100, 65_536),
            Err(BackendError::Unsupported(_))
        ));
        // heads > 128: one query per CTA, several passes.
        let l = plan(ScoresKernel::Tf32, tc_tile(3, 200), 3, 200, 300, 232_448).unwrap();
        assert_eq!(l.grid, (3, 3, 1));
        // SIMT: 16 queries x 128 blocks per CTA, for either d-chunk.
        let l = plan(ScoresKernel::Simt, tc_tile(37, 64), 37, 64, 1000, 0).unwrap();
        assert_eq!((l.kernel, l.grid), ("block_scores_simt", (8, 3, 1)));
        let l = with_simt_chunk(l, SimtChunk::D16);
        assert_eq!((l.kernel, l.grid), ("block_scores_simt_d16", (8, 3, 1)));
        let l = plan(ScoresKernel::Simt, tc_tile(256, 64), 256, 64, 4096, 0).unwrap();
        assert_eq!(l.grid, (32, 16, 1));
        let l = plan(ScoresKernel::Simt, tc_tile(16, 7), 16, 7, 128, 0).unwrap();
        assert_eq!(l.grid, (1, 1, 1));
        let warp = plan(ScoresKernel::Warp, tc_tile(3, 5), 3, 5, 70, 0).unwrap();
        assert_eq!(with_simt_chunk(warp.clone(), SimtChunk::D16), warp);
        let l = plan(ScoresKernel::Warp, tc_tile(3, 5), 3, 5, 70, 0).unwrap();
        assert_eq!(l.grid, (27, 1, 1));
    }

    #[test]
    fn wgmma_plans_cover_every_unit() {
        // The SS kernels (QSA_SCORES_WG=ss; the RS kernels' plans: gpu/scores/wgrs.rs).
        let sw = Switches::from_pairs(&[("QSA_SCORES_WG", "ss")]);
        let ss = |k, shape, limit| plan_on(k, TcTile::Wide, TcEngine::Wgmma, shape, limit, 1, &sw);
        let tf32 =
            |nq, heads, blocks| ss(ScoresKernel::Tf32, (nq, heads, blocks), 232_448).unwrap();
        // 256 queries of 64 heads: 256 units, 4 per CTA; 128 blocks per CTA.
        let l = tf32(256, 64, 4096);
        assert_eq!(
            (
                l.kernel,
                l.variant.as_str(),
                l.grid,
                l.block,
                l.shared_bytes
            ),
            (
                "block_scores_tf32_wgmma",
                "tf32_wgmma",
                (32, 64, 1),
                128,
                100_352
            )
        );
        // Ragged 9 x 7 x 77: 4 queries per unit, 3 units, one CTA.
        assert_eq!(tf32(9, 7, 77).grid, (1, 1, 1));
        // 200 heads: one query per unit (4 passes), 2 queries.
        assert_eq!(tf32(2, 200, 300).grid, (3, 1, 1));
        let bf = ss(ScoresKernel::Bf16, (256, 64, 4096), 232_448).unwrap();
        assert_eq!(
            (bf.kernel, bf.grid, bf.shared_bytes),
            ("block_scores_bf16_wgmma", (16, 64, 1), 86_016)
        );
        // Units per CTA from the switch: grid.y follows; other launches unchanged.
        let l16 = with_wgmma_units(bf, 16, (256, 64, 4096), 232_448).unwrap();
        assert_eq!(l16.grid, (16, 16, 1));
        let simt = plan(ScoresKernel::Simt, TcTile::Wide, 37, 64, 1000, 0).unwrap();
        assert_eq!(
            with_wgmma_units(simt.clone(), 16, (37, 64, 1000), 0).unwrap(),
            simt
        );
        // sm_86's 99 KiB would not hold the TF32 tile: a clear refusal, not a launch.
        assert!(matches!(
            ss(ScoresKernel::Tf32, (1, 64, 1), 99_000),
            Err(BackendError::Unsupported(_))
        ));
    }

    #[test]
    fn amd_matrix_plans_cover_every_block_and_query() {
        let wmma = ScoresKernel::AmdMatrixBf16(AmdMatrix::Wmma);
        let mfma = ScoresKernel::AmdMatrixBf16(AmdMatrix::Mfma);
        // gfx12: 8 waves x 2 n-tiles x 16 = 256 blocks per CTA; gfx950: 4 x 4 x 16 = 256.
        let l = plan(wmma, TcTile::Wide, 256, 64, 4096, 65_536).unwrap();
        assert_eq!(
            (l.kernel, l.variant.as_str(), l.grid, l.shared_bytes),
            ("block_scores_wmma_bf16", "wmma_bf16", (16, 32, 1), 0)
        );
        let l = plan(mfma, TcTile::Wide, 256, 64, 4096, 163_840).unwrap();
        assert_eq!(
            (l.kernel, l.variant.as_str(), l.grid, l.shared_bytes),
            ("block_scores_mfma_bf16", "mfma_bf16", (16, 32, 1), 0)
        );
        // Ragged: 9 queries x 77 blocks: one CTA column, two query groups; decode: 1 query.
        assert_eq!(
            plan(wmma, TcTile::Wide, 9, 7, 77, 0).unwrap().grid,
            (1, 2, 1)
        );
        assert_eq!(
            plan(mfma, TcTile::Wide, 1, 64, 262_144, 0).unwrap().grid,
            (1024, 1, 1)
        );
        assert_eq!(
            plan(mfma, TcTile::Wide, 8, 64, 257, 0).unwrap().grid,
            (2, 1, 1)
        );
        // No LDS, so no shared-memory limit; grid.y is the limit.
        assert!(matches!(
            plan(wmma, TcTile::Wide, AMC_QPC * MAX_GRID_Y + 1, 1, 1, 0),
            Err(BackendError::Shape(_))
        ));
        assert!(plan(wmma, TcTile::Wide, AMC_QPC * MAX_GRID_Y, 1, 1, 0).is_ok());
        assert!(matches!(
            plan(mfma, TcTile::Wide, 1, 1, i32::MAX as usize - 100, 0),
            Err(BackendError::Shape(_))
        ));
    }

    /// `QSA_SCORES_SIMT_DC=16` launches `block_scores_simt_d16` where it is built (NVIDIA
    /// sm_90+) and is refused, naming kernel, target and fix, elsewhere; it changes nothing
    /// when another kernel runs.
    #[test]
    fn limits_are_shape_errors() {
        assert!(matches!(
            plan(
                ScoresKernel::Simt,
                TcTile::Wide,
                SIMT_QUERIES * MAX_GRID_Y + 1,
                1,
                1,
                0
            ),
            Err(BackendError::Shape(_))
        ));
        assert!(plan(
            ScoresKernel::Simt,
            TcTile::Wide,
            SIMT_QUERIES * MAX_GRID_Y,
            1,
            1,
            0
        )
        .is_ok());
        assert!(matches!(
            plan(
                ScoresKernel::Simt,
                TcTile::Wide,
                1,
                1,
                i32::MAX as usize - 100,
                0
            ),
            Err(BackendError::Shape(_))
        ));
        assert!(matches!(
            plan(ScoresKernel::Tf32, TcTile::Wide, 1 << 20, 64, 1, 1 << 20),
            Err(BackendError::Shape(_))
        ));
    }
}

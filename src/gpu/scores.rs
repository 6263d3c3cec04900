//! GPU host code for the scores family: shape checks, dispatch, upload, launches
//! (see gpu/mod.rs). Launch rules mirror the header comments of kernels/block_scores.cu.

use super::launch::{launch, LaunchPlan, PlanArg, PlannedCall, Role, Step};
use super::{as_bytes, Family, GpuApi, GpuProps, LaunchDims};
use crate::backend::{BackendError, BackendResult, Prepared};
use crate::dispatch::scores::{
    amd_matrix, auto_units_per_cta, check_switches, choose_for, simt_chunk_for, simt_d16_built,
    tc_engine, tc_tile_on, wg_kernel, wgmma_units_per_cta, AmdMatrix, ScoresKernel, SimtChunk,
    TcEngine, TcTile, WgKernel, WG_UPC_DEFAULT,
};

use crate::dispatch::{Feature, Switches, TargetCaps};
use crate::problem::{Output, ScoresProblem, HEAD_DIM};

mod decode;
mod wgrs;

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
/// Largest grid.y of a launch.
const MAX_GRID_Y: usize = 65_535;

/// The launch of one kernel for one shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScoresLaunch {
    /// `extern "C"` name in block_scores.cubin / .co.
    pub kernel: &'static str,
    /// What `Prepared::dispatched` reports: the variant name, plus the tile for TC kernels.
    pub variant: String,
    pub grid: (u32, u32, u32),
    /// Threads per block (x).
    pub block: u32,
    pub shared_bytes: u32,
    /// Arguments after (q, kb, w, s, nq, heads, blocks): the mma.sync decode kernels' ring
    /// depth; empty for the others.
    pub extra_args: Vec<i32>,
}

fn shape_err(msg: String) -> BackendError {
    BackendError::Shape(msg)
}

fn to_u32(x: usize, what: &str) -> BackendResult<u32> {
    u32::try_from(x).map_err(|_| shape_err(format!("{what} = {x} does not fit a launch")))
}

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
            let cfg = crate::dispatch::scores::decode_wg::config_for(sw)
                .map_err(BackendError::Unsupported)?;
            let sms = multiprocessors as usize;
            decode::plan_decode_wg(kernel, &cfg, sms, (nq, heads, blocks), shared_limit)
        }
        ScoresKernel::Tf32 | ScoresKernel::Bf16 if tile == TcTile::Decode => {
            let cfg = crate::dispatch::scores::decode::config_for(sw, shared_limit)
                .map_err(BackendError::Unsupported)?;
            let sms = multiprocessors as usize;
            decode::plan_decode(kernel, &cfg, sms, nq, heads, blocks, shared_limit)
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

fn check_lengths(p: &ScoresProblem) -> BackendResult<()> {
    let want = |name: &str, got: usize, dims: &[usize]| {
        let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        match n {
            Some(n) if n == got => Ok(()),
            _ => Err(BackendError::Input(format!(
                "scores: {name} has {got} values, expected {dims:?} = {n:?}"
            ))),
        }
    };
    want("q", p.q.len(), &[p.nq, p.heads, HEAD_DIM])?;
    want("kb", p.kb.len(), &[p.blocks, HEAD_DIM])?;
    want("w", p.w.len(), &[p.nq, p.heads])
}

/// The shape of one scores call: all a plan needs (no data).
#[derive(Clone, Copy, Debug)]
pub struct ScoresCall {
    pub nq: usize,
    pub heads: usize,
    pub blocks: usize,
}

/// Choose the kernel with `crate::dispatch` and return every buffer and launch of one call.
/// The runner launches this plan (`prepare`), `qsa plan` prints it.
pub fn launch_plan(
    caps: &TargetCaps,
    props: &GpuProps,
    switches: &Switches,
    p: &ScoresCall,
) -> BackendResult<LaunchPlan> {
    check_switches(switches).map_err(BackendError::Input)?;
    let kernel = choose_for(caps, switches, p.nq);
    // Defence in depth: the TC kernels are absent from code objects below sm_80 and on AMD
    // (the wgmma ones from all but sm_90a: `tc_engine` checks `wgmma_built`).
    let need = match kernel {
        ScoresKernel::Tf32 => Some(Feature::Tf32Tc),
        ScoresKernel::Bf16 => Some(Feature::Bf16Tc),
        _ => None,
    };
    if let Some(f) = need {
        if !caps.has(f) {
            return Err(BackendError::Unsupported(format!(
                "{} scorer needs {f:?}, which target {} lacks",
                kernel.name(),
                caps.name
            )));
        }
    }
    // The matrix-core kernels exist only in the code object of the arch they were built for.
    if let ScoresKernel::AmdMatrixBf16(m) = kernel {
        if amd_matrix(caps) != Some(m) {
            return Err(BackendError::Unsupported(format!(
                "{} scorer is not built for target {}",
                kernel.name(),
                caps.name
            )));
        }
    }
    let chunk = simt_chunk_for(switches);
    if kernel == ScoresKernel::Simt && chunk == SimtChunk::D16 && !simt_d16_built(caps) {
        return Err(BackendError::Unsupported(format!(
            "QSA_SCORES_SIMT_DC=16: {} is built for NVIDIA sm_90+ only, not for target {}; drop the switch",
            chunk.kernel(),
            caps.name
        )));
    }
    let empty = p.nq == 0 || p.blocks == 0 || p.heads == 0;
    let launch_of = if empty {
        None
    } else {
        let limit = caps.shared_per_block.min(props.max_shared_per_block);
        let tile = tc_tile_on(caps, switches, kernel, p.nq, p.heads);
        let engine = tc_engine(caps, switches, tile);
        let (shape, sms) = ((p.nq, p.heads, p.blocks), props.multiprocessors);
        let l = plan_on(kernel, tile, engine, shape, limit, sms, switches)?;
        let upc = wgmma_units_per_cta(switches).unwrap_or_else(|| {
            // The units and CTA columns of the launch planned above.
            let mtq = p.heads.div_ceil(16);
            let units = p.nq.div_ceil(if mtq <= 4 { 4 / mtq } else { 1 });
            let sms = caps.multiprocessors.max(1) as usize;
            auto_units_per_cta(units, l.grid.0 as usize, sms)
        });
        let l = with_wgmma_units(l, upc, (p.nq, p.heads, p.blocks), limit)?;
        Some(with_simt_chunk(l, chunk))
    };
    let variant = launch_of
        .as_ref()
        .map_or_else(|| kernel.name().to_string(), |l| l.variant.clone());
    let mut lp = LaunchPlan::new(Family::Scores, variant);
    let out_len =
        p.nq.checked_mul(p.blocks)
            .ok_or_else(|| shape_err("nq * blocks overflows".into()))?;
    if out_len == 0 {
        return Ok(lp);
    }
    let s = lp.buffer("s", out_len * 4, Role::Output);
    let Some(l) = launch_of else {
        // heads == 0: every score is 0.
        lp.call.push(Step::Zero { buffer: "s" });
        return Ok(lp);
    };
    let q = lp.buffer("q", p.nq * p.heads * HEAD_DIM * 4, Role::Input);
    let kb = lp.buffer("kb", p.blocks * HEAD_DIM * 4, Role::Input);
    let w = lp.buffer("w", p.nq * p.heads * 4, Role::Input);
    let dims = LaunchDims {
        grid: l.grid,
        block: (l.block, 1, 1),
        shared_bytes: l.shared_bytes,
    };
    let mut args = vec![
        q,
        kb,
        w,
        s,
        PlanArg::I32(p.nq as i32),
        PlanArg::I32(p.heads as i32),
        PlanArg::I32(p.blocks as i32),
    ];
    args.extend(l.extra_args.iter().map(|&a| PlanArg::I32(a)));
    lp.call.push(launch(l.kernel, dims, args));
    Ok(lp)
}

/// Check `p`'s data against its shape, plan the call, upload the inputs, and return the
/// prepared call. The signature is the contract with `gpu::backend`.
pub fn prepare<'a, A: GpuApi>(
    api: &'a A,
    caps: &TargetCaps,
    switches: &Switches,
    p: &'a ScoresProblem,
) -> BackendResult<Box<dyn Prepared + 'a>> {
    check_lengths(p)?;
    let shape = ScoresCall {
        nq: p.nq,
        heads: p.heads,
        blocks: p.blocks,
    };
    let plan = launch_plan(caps, api.props(), switches, &shape)?;
    let inputs = [
        ("q", as_bytes(&p.q)),
        ("kb", as_bytes(&p.kb)),
        ("w", as_bytes(&p.w)),
    ];
    let output = |c: &PlannedCall<'a, A>| {
        Ok(Output::Scores(if c.plan().find("s").is_some() {
            c.download::<f32>("s")?
        } else {
            Vec::new()
        }))
    };
    Ok(Box::new(PlannedCall::new(api, plan, &inputs, output)?))
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
        let sw = Switches::new([("QSA_SCORES_WG".to_string(), "ss".to_string())].into());
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
    fn simt_d16_only_where_it_is_built() {
        use crate::dispatch::Vendor;
        let target = |name: &str, vendor, features| TargetCaps {
            name: name.into(),
            vendor,
            wave: 32,
            shared_per_block: 232_448,
            multiprocessors: 1,
            features,
        };
        let props = GpuProps {
            name: "test".into(),
            arch: "test".into(),
            multiprocessors: 1,
            warp_size: 32,
            max_shared_per_block: 232_448,
        };
        let sm90 = target(
            "sm_90",
            Vendor::Nvidia,
            vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Clusters],
        );
        let sm75 = target("sm_75", Vendor::Nvidia, vec![]);
        let shape = ScoresCall {
            nq: 40,
            heads: 10,
            blocks: 130,
        };
        let sw = |kv: &[(&str, &str)]| {
            Switches::new(
                kv.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let kernel_of = |lp: &LaunchPlan| {
            lp.call
                .iter()
                .find_map(|s| match s {
                    Step::Launch { kernel, .. } => Some(kernel.clone()),
                    _ => None,
                })
                .unwrap()
        };
        let d16 = sw(&[("STRATA_QSA_WARP", "1"), ("QSA_SCORES_SIMT_DC", "16")]);
        let lp = launch_plan(&sm90, &props, &d16, &shape).unwrap();
        assert_eq!(kernel_of(&lp), "block_scores_simt_d16");
        assert_eq!(lp.dispatched, "simt");
        let lp = launch_plan(&sm75, &props, &sw(&[]), &shape).unwrap();
        assert_eq!(kernel_of(&lp), "block_scores_simt");
        match launch_plan(&sm75, &props, &d16, &shape) {
            Err(BackendError::Unsupported(m)) => assert!(
                m.contains(
                    "block_scores_simt_d16 is built for NVIDIA sm_90+ only, not for target sm_75"
                ),
                "{m}"
            ),
            other => panic!("sm_75 with QSA_SCORES_SIMT_DC=16: {other:?}"),
        }
        // The tensor-core kernel runs unchanged under the switch.
        let tf32 =
            launch_plan(&sm90, &props, &sw(&[("QSA_SCORES_SIMT_DC", "16")]), &shape).unwrap();
        assert_eq!(kernel_of(&tf32), "block_scores_tf32");
    }

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

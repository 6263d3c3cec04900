//! The launch of the decode scorers (kernels/common/scores_decode.h, "Launch"): persistent
//! CTAs, `cfg.warps` warps each, `cfg.stages` ring buffers, one CTA row per query group; and
//! of their wgmma twins (kernels/common/scores_decode_wg.h, "Launch"): persistent CTAs of
//! one warpgroup, Q resident, one CTA row per query group.

use super::{shape_err, to_u32, ScoresLaunch, MAX_GRID_Y};
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::scores::decode::{
    holds_heads, query_groups, DecodeConfig, GridFill, MAX_STAGES,
};
use crate::dispatch::scores::decode_wg::{WgDecodeConfig, TILE_BLOCKS};
use crate::dispatch::scores::ScoresKernel;

/// What both decode scorers' persistent launches are made of.
struct Persistent {
    /// Entry point.
    name: &'static str,
    /// What `Prepared::dispatched` reports.
    variant: &'static str,
    /// Threads per CTA.
    threads: usize,
    /// Arguments past the common seven.
    extra_args: Vec<i32>,
    /// Blocks per tile.
    tile_blocks: usize,
    /// Streamers per CTA (each walks its own tiles: 1, or 2 warpgroups of `_decode_wgc2`).
    streamers: usize,
    /// Dynamic shared memory per CTA.
    shared: usize,
    ctas_per_sm: usize,
    fill: GridFill,
}

/// The launch of either decode scorer: the checks both share (heads, shared memory, int32
/// block indices, grid.y) and their persistent grid: per query group, min(CTAs for one tile
/// per streamer, multiprocessors x CTAs per SM / query groups); `GridFill::Even` then takes
/// the fewest CTAs that keep the most tiles any streamer walks.
fn persistent_launch(
    p: Persistent,
    multiprocessors: usize,
    (nq, heads, blocks): (usize, usize, usize),
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let name = p.name;
    if !holds_heads(heads) {
        return Err(BackendError::Unsupported(format!(
            "{name} holds at most 64 heads per query (4 m-tiles of 16), the call has {heads}; drop QSA_SCORES_TILE=decode"
        )));
    }
    if p.shared > shared_limit as usize {
        return Err(BackendError::Unsupported(format!(
            "{name} needs {} B of shared memory per block, the target allows {shared_limit}",
            p.shared
        )));
    }
    // The kernel's block indices are ints up to tiles * bn - 1 < blocks + bn.
    let bn = p.tile_blocks;
    if blocks > i32::MAX as usize - bn {
        return Err(shape_err(format!(
            "{name}: blocks = {blocks} exceeds 2^31 - 1 - {bn}; split the blocks"
        )));
    }
    let groups = query_groups(nq, heads);
    if groups > MAX_GRID_Y {
        return Err(shape_err(format!(
            "{name}: nq = {nq} needs grid.y = {groups} > {MAX_GRID_Y}; split the queries"
        )));
    }
    // Persistent: the SMs' CTAs shared among the query groups, never more than the tiles.
    let tiles = blocks.div_ceil(bn);
    let per_group = (multiprocessors.max(1) * p.ctas_per_sm / groups).max(1);
    let mut ctas = per_group.min(tiles.div_ceil(p.streamers));
    if p.fill == GridFill::Even {
        let most = tiles.div_ceil(ctas * p.streamers);
        ctas = tiles.div_ceil(most * p.streamers);
    }
    Ok(ScoresLaunch {
        kernel: p.name,
        variant: p.variant.into(),
        grid: (to_u32(ctas, "grid.x")?, groups as u32, 1),
        block: p.threads as u32,
        shared_bytes: p.shared as u32,
        extra_args: p.extra_args,
    })
}

/// The wgmma decode scorer's launch for `nq x heads x blocks` (all >= 1) on `multiprocessors`
/// SMs (kernels/common/scores_decode_wg.h, "Launch"): `persistent_launch` over tiles of 64
/// blocks, one warpgroup per CTA (two for `_decode_wgc2`), Q's bytes (and the rings') of
/// dynamic shared memory; the ring kernels' last argument is the ring depth.
pub(super) fn plan_decode_wg(
    kernel: ScoresKernel,
    cfg: &WgDecodeConfig,
    multiprocessors: usize,
    shape: (usize, usize, usize),
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let bf16 = kernel == ScoresKernel::Bf16;
    let (name, variant) = cfg.kernel(bf16);
    let p = Persistent {
        name,
        variant,
        threads: cfg.threads(),
        extra_args: cfg.extra_args(),
        tile_blocks: TILE_BLOCKS,
        streamers: cfg.streamers(),
        shared: cfg.shared_bytes(bf16),
        ctas_per_sm: cfg.ctas_per_sm,
        fill: cfg.fill,
    };
    persistent_launch(p, multiprocessors, shape, shared_limit)
}

/// Grid, block and shared memory of a mma.sync decode scorer for `nq x heads x blocks`
/// (all at least 1) on `multiprocessors` SMs (kernels/common/scores_decode.h, "Launch"):
/// `persistent_launch` over tiles of 32 blocks per warp; the kernel's last argument is
/// `cfg.stages`.
pub(super) fn plan_decode(
    kernel: ScoresKernel,
    cfg: &DecodeConfig,
    multiprocessors: usize,
    shape: (usize, usize, usize),
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let (name, variant) = match kernel {
        ScoresKernel::Tf32 => ("block_scores_tf32_decode", "tf32_decode"),
        _ => ("block_scores_bf16_decode", "bf16_decode"),
    };
    debug_assert!((2..=MAX_STAGES).contains(&cfg.stages));
    let p = Persistent {
        name,
        variant,
        threads: cfg.threads(),
        extra_args: vec![cfg.stages as i32],
        tile_blocks: cfg.blocks_per_tile(),
        streamers: 1,
        shared: cfg.shared_bytes(),
        ctas_per_sm: cfg.ctas_per_sm,
        fill: cfg.fill,
    };
    persistent_launch(p, multiprocessors, shape, shared_limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200: DecodeConfig = DecodeConfig {
        warps: 8,
        stages: 4,
        ctas_per_sm: 1,
        fill: GridFill::Full,
    };

    #[test]
    fn one_persistent_cta_per_sm_and_query_group() {
        let l = plan_decode(ScoresKernel::Tf32, &H200, 132, (1, 64, 262_144), 232_448).unwrap();
        assert_eq!(
            (
                l.kernel,
                l.variant.as_str(),
                l.grid,
                l.block,
                l.shared_bytes,
                l.extra_args
            ),
            (
                "block_scores_tf32_decode",
                "tf32_decode",
                (132, 1, 1),
                256,
                181_248,
                vec![4]
            )
        );
        // Two query groups share the SMs; 2 CTAs per SM double it.
        let l = plan_decode(ScoresKernel::Bf16, &H200, 132, (2, 64, 262_144), 232_448).unwrap();
        assert_eq!((l.kernel, l.grid), ("block_scores_bf16_decode", (66, 2, 1)));
        let two = DecodeConfig {
            ctas_per_sm: 2,
            ..H200
        };
        let l = plan_decode(ScoresKernel::Tf32, &two, 132, (1, 64, 262_144), 232_448).unwrap();
        assert_eq!(l.grid, (264, 1, 1));
        // Never more CTAs than tiles of 256 blocks; 4 queries of 7 heads per CTA row.
        let l = plan_decode(ScoresKernel::Tf32, &H200, 132, (9, 7, 77), 232_448).unwrap();
        assert_eq!(l.grid, (1, 3, 1));
        let l = plan_decode(ScoresKernel::Tf32, &H200, 2, (1, 64, 1100), 232_448).unwrap();
        assert_eq!(l.grid, (2, 1, 1));
    }

    #[test]
    fn refusals_name_the_limit() {
        let e = plan_decode(ScoresKernel::Tf32, &H200, 132, (1, 65, 100), 232_448).unwrap_err();
        assert!(
            e.to_string().contains("at most 64 heads per query")
                && e.to_string().contains("drop QSA_SCORES_TILE=decode"),
            "{e}"
        );
        let e = plan_decode(ScoresKernel::Tf32, &H200, 132, (1, 64, 100), 101_376).unwrap_err();
        assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("needs 181248 B"), "{e}");
        let e = plan_decode(
            ScoresKernel::Tf32,
            &H200,
            132,
            (1, 64, i32::MAX as usize),
            232_448,
        )
        .unwrap_err();
        assert!(matches!(e, BackendError::Shape(_)), "{e}");
        let e = plan_decode(
            ScoresKernel::Tf32,
            &H200,
            132,
            (4 * (MAX_GRID_Y + 1), 16, 1),
            232_448,
        )
        .unwrap_err();
        assert!(e.to_string().contains("grid.y"), "{e}");
    }

    #[test]
    fn wgmma_decode_plans_cover_every_tile() {
        let two = WgDecodeConfig::regs(2);
        let l = plan_decode_wg(ScoresKernel::Tf32, &two, 132, (1, 64, 262_144), 232_448).unwrap();
        assert_eq!(
            (
                l.kernel,
                l.variant.as_str(),
                l.grid,
                l.block,
                l.shared_bytes,
                l.extra_args
            ),
            (
                "block_scores_tf32_decode_wg",
                "tf32_decode_wg",
                (264, 1, 1),
                128,
                32_768,
                vec![]
            )
        );
        let l = plan_decode_wg(ScoresKernel::Bf16, &two, 132, (2, 64, 262_144), 232_448).unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.shared_bytes),
            ("block_scores_bf16_decode_wg", (132, 2, 1), 16_384)
        );
        // Never more CTAs than tiles of 64 blocks (700 blocks: 11, the last partial).
        let l = plan_decode_wg(ScoresKernel::Tf32, &two, 132, (3, 7, 700), 232_448).unwrap();
        assert_eq!(l.grid, (11, 1, 1));
        let e = plan_decode_wg(ScoresKernel::Tf32, &two, 132, (1, 65, 100), 232_448).unwrap_err();
        assert!(e.to_string().contains("at most 64 heads per query"), "{e}");
        let e = plan_decode_wg(ScoresKernel::Tf32, &two, 132, (1, 64, 100), 16_000).unwrap_err();
        assert!(e.to_string().contains("needs 32768 B"), "{e}");
        let e = plan_decode_wg(
            ScoresKernel::Tf32,
            &two,
            132,
            (1, 64, i32::MAX as usize),
            232_448,
        )
        .unwrap_err();
        assert!(matches!(e, BackendError::Shape(_)), "{e}");
    }

    /// `QSA_SCORES_DECODE_GRID=even`: the fewest CTAs that keep the most tiles per streamer,
    /// so no CTA idles through the last round; the ring kernels' launches.
    #[test]
    fn even_grids_and_ring_launches() {
        use crate::dispatch::scores::decode_wg::{config_for, GROUPS_SWITCH, RING_SWITCH};
        use crate::dispatch::Switches;
        let even = WgDecodeConfig {
            fill: GridFill::Even,
            ..WgDecodeConfig::regs(2)
        };
        // 4,096 tiles on 264 slots: 15 or 16 each on the full grid, 16 each on 256 CTAs.
        let shape = (1, 64, 262_144);
        let full = plan_decode_wg(
            ScoresKernel::Tf32,
            &WgDecodeConfig::regs(2),
            132,
            shape,
            232_448,
        );
        assert_eq!(full.unwrap().grid, (264, 1, 1));
        let l = plan_decode_wg(ScoresKernel::Tf32, &even, 132, shape, 232_448).unwrap();
        assert_eq!(l.grid, (256, 1, 1));
        // 700 blocks = 11 tiles on 4 slots: 3 each on 4 CTAs either way (11 = 3 + 3 + 3 + 2).
        let l = plan_decode_wg(ScoresKernel::Tf32, &even, 2, (1, 64, 700), 232_448).unwrap();
        assert_eq!(
            l.grid,
            (4, 1, 1),
            "an even grid of 11 tiles, 3 per CTA, needs 4 CTAs"
        );
        // The mma.sync kernel too: 1,024 tiles of 256 blocks on 132 slots: 8 each on 128.
        let h200_even = DecodeConfig {
            fill: GridFill::Even,
            ..H200
        };
        let l = plan_decode(ScoresKernel::Tf32, &h200_even, 132, shape, 232_448).unwrap();
        assert_eq!(l.grid, (128, 1, 1));
        // Ring kernels: one warpgroup x 4 tiles (one CTA per SM), two warpgroups x 3 tiles.
        let sw = |kv: &[(&str, &str)]| Switches::from_pairs(kv);
        let c = config_for(&sw(&[(RING_SWITCH, "4")]), false).unwrap();
        let l = plan_decode_wg(ScoresKernel::Tf32, &c, 132, shape, 232_448).unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.block, l.shared_bytes, l.extra_args),
            (
                "block_scores_tf32_decode_wgc",
                (132, 1, 1),
                128,
                163_840,
                vec![4]
            )
        );
        let c = config_for(&sw(&[(RING_SWITCH, "3"), (GROUPS_SWITCH, "2")]), true).unwrap();
        let l = plan_decode_wg(ScoresKernel::Bf16, &c, 132, shape, 232_448).unwrap();
        assert_eq!(
            (
                l.kernel,
                l.variant.as_str(),
                l.grid,
                l.block,
                l.shared_bytes
            ),
            (
                "block_scores_bf16_decode_wgc2",
                "bf16_decode_wgc2",
                (132, 1, 1),
                256,
                212_992
            )
        );
        // Two streamers per CTA: 11 tiles need 6 CTAs, not 11.
        let l = plan_decode_wg(ScoresKernel::Bf16, &c, 132, (1, 64, 700), 232_448).unwrap();
        assert_eq!(l.grid, (6, 1, 1));
    }

    /// `plan_on` (what the runner and `qsa plan` call) takes the SM count and the switches.
    #[test]
    fn plan_on_takes_multiprocessors_and_switches() {
        use crate::dispatch::scores::TcTile;
        use crate::dispatch::Switches;
        let sm90 = |sw: &Switches| {
            super::super::plan_on(
                ScoresKernel::Tf32,
                TcTile::Decode,
                crate::dispatch::scores::TcEngine::MmaSync,
                (1, 64, 262_144),
                232_448,
                132,
                sw,
            )
        };
        assert_eq!(sm90(&Switches::default()).unwrap().grid, (396, 1, 1));
        let sw = Switches::from_pairs(&[
            ("QSA_SCORES_DECODE_CTAS_PER_SM", "1"),
            ("QSA_SCORES_DECODE_WARPS", "8"),
        ]);
        let l = sm90(&sw).unwrap();
        assert_eq!(
            (l.grid, l.block, l.shared_bytes),
            ((132, 1, 1), 256, 181_248)
        );
    }
}

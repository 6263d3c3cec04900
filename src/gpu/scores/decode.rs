//! The launch of the decode scorers (kernels/common/scores_decode.h, "Launch"): persistent
//! CTAs, `cfg.warps` warps each, `cfg.stages` ring buffers, one CTA row per query group; and
//! of their wgmma twins (kernels/common/scores_decode_wg.h, "Launch"): persistent CTAs of
//! one warpgroup, Q resident, one CTA row per query group.

use super::{shape_err, to_u32, ScoresLaunch, MAX_GRID_Y};
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::scores::decode::{holds_heads, query_groups, DecodeConfig, MAX_STAGES};
use crate::dispatch::scores::decode_wg::{WgDecodeConfig, THREADS, TILE_BLOCKS};
use crate::dispatch::scores::ScoresKernel;

/// The wgmma decode scorer's launch for `nq x heads x blocks` (all >= 1) on `multiprocessors`
/// SMs: grid = (min(tiles of 64 blocks, SMs x CTAs per SM / query groups), query groups),
/// 128 threads, Q's bytes of dynamic shared memory; no arguments past the common seven.
pub(super) fn plan_decode_wg(
    kernel: ScoresKernel,
    cfg: &WgDecodeConfig,
    multiprocessors: usize,
    (nq, heads, blocks): (usize, usize, usize),
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let bf16 = kernel == ScoresKernel::Bf16;
    let (name, variant) = if bf16 {
        ("block_scores_bf16_decode_wg", "bf16_decode_wg")
    } else {
        ("block_scores_tf32_decode_wg", "tf32_decode_wg")
    };
    if !holds_heads(heads) {
        return Err(BackendError::Unsupported(format!(
            "{name} holds at most 64 heads per query (4 m-tiles of 16), the call has {heads}; drop QSA_SCORES_TILE=decode"
        )));
    }
    let shared = WgDecodeConfig::shared_bytes(bf16);
    if shared > shared_limit as usize {
        return Err(BackendError::Unsupported(format!(
            "{name} needs {shared} B of shared memory per block, the target allows {shared_limit}"
        )));
    }
    // The kernel's block indices are ints up to tiles * 64 - 1 < blocks + 64.
    if blocks > i32::MAX as usize - TILE_BLOCKS {
        return Err(shape_err(format!(
            "{name}: blocks = {blocks} exceeds 2^31 - 1 - {TILE_BLOCKS}; split the blocks"
        )));
    }
    let groups = query_groups(nq, heads);
    if groups > MAX_GRID_Y {
        return Err(shape_err(format!(
            "{name}: nq = {nq} needs grid.y = {groups} > {MAX_GRID_Y}; split the queries"
        )));
    }
    let tiles = blocks.div_ceil(TILE_BLOCKS);
    let per_group = (multiprocessors.max(1) * cfg.ctas_per_sm / groups).max(1);
    Ok(ScoresLaunch {
        kernel: name,
        variant: variant.into(),
        grid: (to_u32(per_group.min(tiles), "grid.x")?, groups as u32, 1),
        block: THREADS as u32,
        shared_bytes: shared as u32,
        extra_args: Vec::new(),
    })
}

/// Grid, block and shared memory of a decode scorer for `nq x heads x blocks` (all >= 1) on
/// `multiprocessors` SMs; the kernel's last argument is `cfg.stages`.
pub(super) fn plan_decode(
    kernel: ScoresKernel,
    cfg: &DecodeConfig,
    multiprocessors: usize,
    nq: usize,
    heads: usize,
    blocks: usize,
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let (name, variant) = match kernel {
        ScoresKernel::Tf32 => ("block_scores_tf32_decode", "tf32_decode"),
        _ => ("block_scores_bf16_decode", "bf16_decode"),
    };
    if !holds_heads(heads) {
        return Err(BackendError::Unsupported(format!(
            "{name} holds at most 64 heads per query (4 m-tiles of 16), the call has {heads}; drop QSA_SCORES_TILE=decode"
        )));
    }
    debug_assert!((2..=MAX_STAGES).contains(&cfg.stages));
    let shared = cfg.shared_bytes();
    if shared > shared_limit as usize {
        return Err(BackendError::Unsupported(format!(
            "{name} needs {shared} B of shared memory per block, the target allows {shared_limit}"
        )));
    }
    let bn = cfg.blocks_per_tile();
    // The kernel's block indices are ints up to tiles * bn - 1 < blocks + bn.
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
    let per_group = (multiprocessors.max(1) * cfg.ctas_per_sm / groups).max(1);
    Ok(ScoresLaunch {
        kernel: name,
        variant: variant.into(),
        grid: (to_u32(per_group.min(tiles), "grid.x")?, groups as u32, 1),
        block: cfg.threads() as u32,
        shared_bytes: shared as u32,
        extra_args: vec![cfg.stages as i32],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200: DecodeConfig = DecodeConfig {
        warps: 8,
        stages: 4,
        ctas_per_sm: 1,
    };

    #[test]
    fn one_persistent_cta_per_sm_and_query_group() {
        let l = plan_decode(ScoresKernel::Tf32, &H200, 132, 1, 64, 262_144, 232_448).unwrap();
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
        let l = plan_decode(ScoresKernel::Bf16, &H200, 132, 2, 64, 262_144, 232_448).unwrap();
        assert_eq!((l.kernel, l.grid), ("block_scores_bf16_decode", (66, 2, 1)));
        let two = DecodeConfig {
            ctas_per_sm: 2,
            ..H200
        };
        let l = plan_decode(ScoresKernel::Tf32, &two, 132, 1, 64, 262_144, 232_448).unwrap();
        assert_eq!(l.grid, (264, 1, 1));
        // Never more CTAs than tiles of 256 blocks; 4 queries of 7 heads per CTA row.
        let l = plan_decode(ScoresKernel::Tf32, &H200, 132, 9, 7, 77, 232_448).unwrap();
        assert_eq!(l.grid, (1, 3, 1));
        let l = plan_decode(ScoresKernel::Tf32, &H200, 2, 1, 64, 1100, 232_448).unwrap();
        assert_eq!(l.grid, (2, 1, 1));
    }

    #[test]
    fn refusals_name_the_limit() {
        let e = plan_decode(ScoresKernel::Tf32, &H200, 132, 1, 65, 100, 232_448).unwrap_err();
        assert!(
            e.to_string().contains("at most 64 heads per query")
                && e.to_string().contains("drop QSA_SCORES_TILE=decode"),
            "{e}"
        );
        let e = plan_decode(ScoresKernel::Tf32, &H200, 132, 1, 64, 100, 101_376).unwrap_err();
        assert!(matches!(e, BackendError::Unsupported(_)), "{e}");
        assert!(e.to_string().contains("needs 181248 B"), "{e}");
        let e = plan_decode(
            ScoresKernel::Tf32,
            &H200,
            132,
            1,
            64,
            i32::MAX as usize,
            232_448,
        )
        .unwrap_err();
        assert!(matches!(e, BackendError::Shape(_)), "{e}");
        let e = plan_decode(
            ScoresKernel::Tf32,
            &H200,
            132,
            4 * (MAX_GRID_Y + 1),
            16,
            1,
            232_448,
        )
        .unwrap_err();
        assert!(e.to_string().contains("grid.y"), "{e}");
    }

    #[test]
    fn wgmma_decode_plans_cover_every_tile() {
        let two = WgDecodeConfig { ctas_per_sm: 2 };
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
        let sw = Switches::new(
            [
                ("QSA_SCORES_DECODE_CTAS_PER_SM", "1"),
                ("QSA_SCORES_DECODE_WARPS", "8"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        let l = sm90(&sw).unwrap();
        assert_eq!(
            (l.grid, l.block, l.shared_bytes),
            ((132, 1, 1), 256, 181_248)
        );
    }
}

//! The launch of the A-in-registers wgmma scorers (kernels/common/scores_wgrs.h, "Launch";
//! `QSA_SCORES_WG=rs*`): one warpgroup item is 64 rows (4 queries x 16 heads) x BN blocks;
//! a warpgroup walks whole groups of 4 queries (all their head tiles), a CTA holds `WGS`
//! warpgroups and one B tile. The grid is sized for one wave: every warpgroup slot of the card
//! gets ceil(tasks / slots) groups (a task: one group against one B tile).

use super::{shape_err, to_u32, ScoresLaunch, MAX_GRID_Y};
use crate::backend::{BackendError, BackendResult};
use crate::problem::HEAD_DIM;

/// One kernel of kernels/block_scores.cu's `_wgrs` entry points: its name, BN, warpgroups per
/// CTA and the minimum CTAs per SM of its `__launch_bounds__` (what a wave is planned with).
/// Mirrors the entry points; `resources.snap` shows the occupancy each gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RsKernel {
    pub name: &'static str,
    pub bn: usize,
    pub wgs: usize,
    pub ctas_per_sm: usize,
}

/// (BF16?, BN, prefetch, swizzled B) -> kernel. No TF32 rs256p: 128 accumulators + 64 A + 64
/// prefetched floats exceed 255 registers.
const RS_KERNELS: [(bool, usize, bool, bool, RsKernel); 10] = [
    (
        false,
        128,
        false,
        false,
        rs("block_scores_tf32_wgrs128", 128, 1, 3),
    ),
    (
        false,
        128,
        true,
        false,
        rs("block_scores_tf32_wgrs128p", 128, 1, 2),
    ),
    (
        false,
        256,
        false,
        false,
        rs("block_scores_tf32_wgrs256", 256, 2, 1),
    ),
    (
        true,
        128,
        false,
        false,
        rs("block_scores_bf16_wgrs128", 128, 1, 4),
    ),
    (
        true,
        256,
        false,
        false,
        rs("block_scores_bf16_wgrs256", 256, 2, 1),
    ),
    (
        true,
        256,
        true,
        false,
        rs("block_scores_bf16_wgrs256p", 256, 2, 1),
    ),
    (
        false,
        128,
        false,
        true,
        rs("block_scores_tf32_wgrs128s", 128, 1, 3),
    ),
    (
        false,
        256,
        false,
        true,
        rs("block_scores_tf32_wgrs256s", 256, 2, 1),
    ),
    (
        true,
        128,
        false,
        true,
        rs("block_scores_bf16_wgrs128s", 128, 1, 4),
    ),
    (
        true,
        256,
        true,
        true,
        rs("block_scores_bf16_wgrs256ps", 256, 2, 1),
    ),
];

const fn rs(name: &'static str, bn: usize, wgs: usize, ctas_per_sm: usize) -> RsKernel {
    RsKernel {
        name,
        bn,
        wgs,
        ctas_per_sm,
    }
}

/// The kernel for (BF16?, BN, prefetch, swizzle), if one is built.
pub(super) fn rs_kernel(bf16: bool, bn: usize, prefetch: bool, swizzle: bool) -> Option<RsKernel> {
    RS_KERNELS
        .iter()
        .find(|r| (r.0, r.1, r.2, r.3) == (bf16, bn, prefetch, swizzle))
        .map(|r| r.4)
}

/// Grid, block and shared memory of an RS kernel for `nq x heads x blocks` (all >= 1) on
/// `multiprocessors` SMs; `rounds` (QSA_SCORES_WG_UPC) overrides the groups per warpgroup.
pub(super) fn plan_wgrs(
    bf16: bool,
    (bn, prefetch, swizzle): (usize, bool, bool),
    (nq, heads, blocks): (usize, usize, usize),
    multiprocessors: usize,
    rounds: Option<usize>,
    shared_limit: u32,
) -> BackendResult<ScoresLaunch> {
    let (prec, variant) = if bf16 {
        ("BF16", "bf16_wgmma")
    } else {
        ("TF32", "tf32_wgmma")
    };
    let Some(k) = rs_kernel(bf16, bn, prefetch, swizzle) else {
        let (p, s) = (
            if prefetch { "p" } else { "" },
            if swizzle { "s" } else { "" },
        );
        let built: Vec<String> = RS_KERNELS
            .iter()
            .filter(|r| r.0 == bf16)
            .map(|r| {
                format!(
                    "rs{}{}{}",
                    r.1,
                    if r.2 { "p" } else { "" },
                    if r.3 { "s" } else { "" }
                )
            })
            .collect();
        return Err(BackendError::Unsupported(format!(
            "QSA_SCORES_WG=rs{bn}{p}{s}: no {prec} kernel is built for it; {prec} has {}",
            built.join(", ")
        )));
    };
    // The kernel's block indices are ints up to blocks + BN - 1; 4 G + warp up to nq + 3.
    if blocks > i32::MAX as usize - bn {
        return Err(shape_err(format!(
            "{}: blocks = {blocks} exceeds 2^31 - 1 - {bn}; split the blocks",
            k.name
        )));
    }
    if nq > i32::MAX as usize - 3 {
        return Err(shape_err(format!(
            "{}: nq = {nq} exceeds 2^31 - 4; split the queries",
            k.name
        )));
    }
    let gx = blocks.div_ceil(bn);
    let groups = nq.div_ceil(4);
    let mtq = heads.div_ceil(16);
    let slots = multiprocessors.max(1) * k.ctas_per_sm * k.wgs;
    let rounds = rounds
        .unwrap_or_else(|| (groups * gx).div_ceil(slots))
        .max(1);
    // A warpgroup's item counter is an int: at most `rounds` groups of mtq head tiles.
    if rounds.saturating_mul(mtq) > i32::MAX as usize {
        return Err(shape_err(format!(
            "{}: {rounds} groups x {mtq} head tiles per warpgroup exceed 2^31 - 1; split the heads",
            k.name
        )));
    }
    let gpc = k.wgs * rounds;
    let gy = groups.div_ceil(gpc);
    if gy > MAX_GRID_Y {
        return Err(shape_err(format!(
            "{}: nq = {nq} needs grid.y = {gy} > {MAX_GRID_Y}; split the queries",
            k.name
        )));
    }
    // B, and 1 KiB to align the swizzled layout's atoms (scores_wgrs.h).
    let shared = bn * HEAD_DIM * if bf16 { 2 } else { 4 } + if swizzle { 1024 } else { 0 };
    if shared > shared_limit as usize {
        return Err(BackendError::Unsupported(format!(
            "{} needs {shared} B of shared memory per block, the target allows {shared_limit}",
            k.name
        )));
    }
    Ok(ScoresLaunch {
        kernel: k.name,
        variant: variant.into(),
        grid: (to_u32(gx, "grid.x")?, gy as u32, 1),
        block: (128 * k.wgs) as u32,
        shared_bytes: shared as u32,
        extra_args: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_wave_at_the_goal_shape() {
        // 256 x 64 x 4096 on 132 SMs: tf32 rs128 has 32 CTA columns x 64 groups = 2048
        // tasks over 396 warpgroup slots: 6 groups each, 11 CTA rows (352 CTAs <= 396).
        let l = plan_wgrs(
            false,
            (128, false, false),
            (256, 64, 4096),
            132,
            None,
            232_448,
        )
        .unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.block, l.shared_bytes),
            ("block_scores_tf32_wgrs128", (32, 11, 1), 128, 65_536)
        );
        // bf16 rs256p: 16 columns x 64 groups = 1024 tasks over 264 slots: 4 groups per
        // warpgroup, 8 per CTA, 8 rows (128 CTAs <= 132).
        let l = plan_wgrs(
            true,
            (256, true, false),
            (256, 64, 4096),
            132,
            None,
            232_448,
        )
        .unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.block, l.shared_bytes),
            ("block_scores_bf16_wgrs256p", (16, 8, 1), 256, 65_536)
        );
        assert_eq!(l.variant, "bf16_wgmma");
    }

    #[test]
    fn every_group_is_planned_and_limits_are_named() {
        for (nq, heads, blocks) in [(9, 7, 77), (1, 200, 3), (37, 64, 1000), (5, 48, 129)] {
            for (bf16, bn, p, sw) in [
                (false, 128, false, false),
                (false, 256, false, true),
                (true, 256, true, true),
            ] {
                for sms in [1, 7, 132] {
                    for rounds in [None, Some(1), Some(3)] {
                        let l =
                            plan_wgrs(bf16, (bn, p, sw), (nq, heads, blocks), sms, rounds, 232_448)
                                .unwrap();
                        let k = rs_kernel(bf16, bn, p, sw).unwrap();
                        // The kernel's split: gpc = ceil(groups / grid.y) groups per CTA.
                        let groups = nq.div_ceil(4);
                        let gpc = groups.div_ceil(l.grid.1 as usize);
                        assert!(gpc * l.grid.1 as usize >= groups);
                        assert!(l.grid.0 as usize * bn >= blocks);
                        assert_eq!(l.block as usize, 128 * k.wgs);
                    }
                }
            }
        }
        let e = plan_wgrs(false, (256, true, false), (4, 64, 64), 1, None, 232_448).unwrap_err();
        assert!(
            e.to_string().contains(
                "QSA_SCORES_WG=rs256p: no TF32 kernel is built for it; TF32 has rs128, rs128p, rs256, rs128s, rs256s"
            ),
            "{e}"
        );
        let l = plan_wgrs(false, (256, false, true), (4, 64, 64), 1, None, 232_448).unwrap();
        assert_eq!(l.shared_bytes, 132_096, "B and the swizzle's alignment");
        let e = plan_wgrs(false, (256, false, false), (4, 64, 64), 1, None, 101_376).unwrap_err();
        assert!(
            e.to_string().contains("needs 131072 B of shared memory"),
            "{e}"
        );
        let e = plan_wgrs(
            true,
            (128, false, false),
            (4, 64, i32::MAX as usize),
            1,
            None,
            232_448,
        )
        .unwrap_err();
        assert!(e.to_string().contains("split the blocks"), "{e}");
    }
}

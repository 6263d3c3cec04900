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

/// Which RS kernel: BN, and the suffixes p (prefetch), s (swizzled B), o (ping-pong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RsFlags {
    pub bn: usize,
    pub prefetch: bool,
    pub swizzle: bool,
    pub pingpong: bool,
}

impl RsFlags {
    /// The `QSA_SCORES_WG` value and kernel-name suffix, e.g. `rs256ps`.
    fn name(self) -> String {
        let f = |on: bool, c: &'static str| if on { c } else { "" };
        format!(
            "rs{}{}{}{}",
            self.bn,
            f(self.prefetch, "p"),
            f(self.swizzle, "s"),
            f(self.pingpong, "o")
        )
    }
}

/// (BF16?, QSA_SCORES_WG value) of every RS kernel block_scores.cu builds, with its BN,
/// warpgroups per CTA and minimum CTAs per SM. Not built: TF32 rs256p (128 accumulators + 64
/// A + 64 prefetched floats exceed 255 registers), BF16 rs256po (spills).
const RS_KERNELS: [(bool, &str, RsKernel); 12] = [
    (false, "rs128", rs("block_scores_tf32_wgrs128", 128, 1, 3)),
    (false, "rs128p", rs("block_scores_tf32_wgrs128p", 128, 1, 2)),
    (false, "rs256", rs("block_scores_tf32_wgrs256", 256, 2, 1)),
    (false, "rs128s", rs("block_scores_tf32_wgrs128s", 128, 1, 3)),
    (false, "rs256s", rs("block_scores_tf32_wgrs256s", 256, 2, 1)),
    (false, "rs256o", rs("block_scores_tf32_wgrs256o", 256, 2, 1)),
    (true, "rs128", rs("block_scores_bf16_wgrs128", 128, 1, 4)),
    (true, "rs256", rs("block_scores_bf16_wgrs256", 256, 2, 1)),
    (true, "rs256p", rs("block_scores_bf16_wgrs256p", 256, 2, 1)),
    (true, "rs128s", rs("block_scores_bf16_wgrs128s", 128, 1, 4)),
    (
        true,
        "rs256ps",
        rs("block_scores_bf16_wgrs256ps", 256, 2, 1),
    ),
    (true, "rs256o", rs("block_scores_bf16_wgrs256o", 256, 2, 1)),
];

const fn rs(name: &'static str, bn: usize, wgs: usize, ctas_per_sm: usize) -> RsKernel {
    RsKernel {
        name,
        bn,
        wgs,
        ctas_per_sm,
    }
}

/// The kernel for (BF16?, flags), if one is built.
pub(super) fn rs_kernel(bf16: bool, flags: RsFlags) -> Option<RsKernel> {
    let name = flags.name();
    RS_KERNELS
        .iter()
        .find(|r| r.0 == bf16 && r.1 == name)
        .map(|r| r.2)
}

/// Grid, block and shared memory of an RS kernel for `nq x heads x blocks` (all >= 1) on
/// `multiprocessors` SMs; `rounds` (QSA_SCORES_WG_UPC) overrides the groups per warpgroup.
pub(super) fn plan_wgrs(
    bf16: bool,
    flags: RsFlags,
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
    let Some(k) = rs_kernel(bf16, flags) else {
        let built: Vec<&str> = RS_KERNELS
            .iter()
            .filter(|r| r.0 == bf16)
            .map(|r| r.1)
            .collect();
        return Err(BackendError::Unsupported(format!(
            "QSA_SCORES_WG={}: no {prec} kernel is built for it; {prec} has {}",
            flags.name(),
            built.join(", ")
        )));
    };
    let bn = k.bn;
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
    let shared = bn * HEAD_DIM * if bf16 { 2 } else { 4 } + if flags.swizzle { 1024 } else { 0 };
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

    fn flags(name: &str) -> RsFlags {
        let bn = if name.starts_with("rs128") { 128 } else { 256 };
        let rest = &name[5..];
        RsFlags {
            bn,
            prefetch: rest.contains('p'),
            swizzle: rest.contains('s'),
            pingpong: rest.contains('o'),
        }
    }

    #[test]
    fn one_wave_at_the_goal_shape() {
        // 256 x 64 x 4096 on 132 SMs: tf32 rs128 has 32 CTA columns x 64 groups = 2048
        // tasks over 396 warpgroup slots: 6 groups each, 11 CTA rows (352 CTAs <= 396).
        let l = plan_wgrs(false, flags("rs128"), (256, 64, 4096), 132, None, 232_448).unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.block, l.shared_bytes),
            ("block_scores_tf32_wgrs128", (32, 11, 1), 128, 65_536)
        );
        // bf16 rs256p: 16 columns x 64 groups = 1024 tasks over 264 slots: 4 groups per
        // warpgroup, 8 per CTA, 8 rows (128 CTAs <= 132).
        let l = plan_wgrs(true, flags("rs256p"), (256, 64, 4096), 132, None, 232_448).unwrap();
        assert_eq!(
            (l.kernel, l.grid, l.block, l.shared_bytes),
            ("block_scores_bf16_wgrs256p", (16, 8, 1), 256, 65_536)
        );
        assert_eq!(l.variant, "bf16_wgmma");
    }

    #[test]
    fn every_built_kernel_is_planned_and_covers_every_group() {
        for &(bf16, name, k) in &RS_KERNELS {
            assert_eq!(flags(name).name(), name);
            assert!(
                k.name.ends_with(&format!("_wg{name}")),
                "{name}: {}",
                k.name
            );
            for (nq, heads, blocks) in [(9, 7, 77), (1, 200, 3), (37, 64, 1000), (5, 48, 129)] {
                for sms in [1, 7, 132] {
                    for rounds in [None, Some(1), Some(3)] {
                        let l =
                            plan_wgrs(bf16, flags(name), (nq, heads, blocks), sms, rounds, 232_448)
                                .unwrap();
                        assert_eq!(l.kernel, k.name);
                        // The kernel's split: gpc = ceil(groups / grid.y) groups per CTA.
                        let groups = nq.div_ceil(4);
                        let gpc = groups.div_ceil(l.grid.1 as usize);
                        assert!(gpc * l.grid.1 as usize >= groups);
                        assert!(l.grid.0 as usize * k.bn >= blocks);
                        assert_eq!(l.block as usize, 128 * k.wgs);
                    }
                }
            }
        }
    }

    #[test]
    fn limits_and_unbuilt_kernels_are_named() {
        let e = plan_wgrs(false, flags("rs256p"), (4, 64, 64), 1, None, 232_448).unwrap_err();
        assert!(
            e.to_string().contains(
                "QSA_SCORES_WG=rs256p: no TF32 kernel is built for it; TF32 has rs128, rs128p, rs256, rs128s, rs256s, rs256o"
            ),
            "{e}"
        );
        let l = plan_wgrs(false, flags("rs256s"), (4, 64, 64), 1, None, 232_448).unwrap();
        assert_eq!(l.shared_bytes, 132_096, "B and the swizzle's alignment");
        let e = plan_wgrs(false, flags("rs256"), (4, 64, 64), 1, None, 101_376).unwrap_err();
        assert!(
            e.to_string().contains("needs 131072 B of shared memory"),
            "{e}"
        );
        let big = (4, 64, i32::MAX as usize);
        let e = plan_wgrs(true, flags("rs128"), big, 1, None, 232_448).unwrap_err();
        assert!(e.to_string().contains("split the blocks"), "{e}");
    }
}

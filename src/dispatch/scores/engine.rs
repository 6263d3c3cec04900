//! Which tensor-core instructions run the prefill (wide-tile) TF32 / BF16 scorers: Hopper's
//! warpgroup MMA (`wgmma`, operands in shared memory, asynchronous) where the target's code
//! object has it, warp-level `mma.sync` elsewhere and when forced. The decode tile
//! (`TcTile::Decode`) takes its wgmma kernels (`decode_wg`) only where they are built and
//! `decode_wg::wanted` says so (`QSA_SCORES_DECODE_ENGINE`).

use super::{TcTile, KERNEL_SWITCH};
use crate::dispatch::{Feature, Switches, TargetCaps, Vendor};

/// The instruction family of a TF32 / BF16 tensor-core launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcEngine {
    /// `mma.sync` m16n8k8 / m16n8k16: `block_scores_{tf32,bf16}[_decode]` (sm_80+).
    MmaSync,
    /// `wgmma.mma_async` m64nNk8 / k16: `block_scores_{tf32,bf16}_wgmma`, and for the decode
    /// tile `block_scores_{tf32,bf16}_decode_wg` (sm_90a only).
    Wgmma,
}

/// `QSA_SCORES_KERNEL` values that force the mma.sync kernels where wgmma would run.
pub const FORCE_MMA_SYNC: [&str; 2] = ["tf32_mma", "bf16_mma"];

/// `QSA_SCORES_WG_UPC` sets how much a wgmma CTA computes against its staged B tile: the SS
/// kernel's 64-row units per CTA (one query of 64 heads each), the RS kernels' groups of 4
/// queries per warpgroup (gpu/scores/wgrs.rs; default: one wave). More stage B fewer times,
/// fewer give more CTAs.
pub const WG_UPC_SWITCH: &str = "QSA_SCORES_WG_UPC";
/// What `gpu::scores::plan_engine` plans with when it is not told (`auto_units_per_cta` is
/// the dispatch's choice).
pub const WG_UPC_DEFAULT: usize = 4;

/// `QSA_SCORES_WG_UPC`, if set (checked by `check_wg_upc`).
pub fn wgmma_units_per_cta(sw: &Switches) -> Option<usize> {
    sw.get(WG_UPC_SWITCH).and_then(|v| v.parse().ok())
}

/// Units per CTA for a call of `units` 64-row units and `ctas_x` CTA columns (blocks / BN):
/// the largest of 16, 8, 4, 2, 1 that still gives every multiprocessor a CTA. Staging B
/// costs each CTA a fixed time, so more units per CTA pay until the grid no longer fills the
/// card. Measured on the H200 (2026-12-02, bench/scores_vs_torch.py, 132 SMs, median us for
/// UPC = 1 / 2 / 4 / 8 / 16): 256 x 64 x 4096 TF32 343 / 257 / 205 / 180 / 167, BF16
/// 235 / 158 / 122 / 101 / 91; 256 x 64 x 2048 TF32 177 / 132 / 105 / 93 / 88, BF16
/// 121 / 84 / 64 / 55 / 66 (16 leaves 128 CTAs for 132 SMs): this rule picks the fastest in
/// all four.
pub fn auto_units_per_cta(units: usize, ctas_x: usize, multiprocessors: usize) -> usize {
    [16, 8, 4, 2]
        .into_iter()
        .find(|&u| units.div_ceil(u) * ctas_x >= multiprocessors)
        .unwrap_or(1)
}

/// `QSA_SCORES_WG_UPC`'s value, before any work: 1, 2, 4, 8 or 16.
pub fn check_wg_upc(sw: &Switches) -> Result<(), String> {
    match sw.get(WG_UPC_SWITCH) {
        None | Some("1" | "2" | "4" | "8" | "16") => Ok(()),
        Some(other) => Err(format!(
            "{WG_UPC_SWITCH}={other}: expected 1, 2, 4, 8 or 16"
        )),
    }
}

/// `QSA_SCORES_WG` picks which sm_90a prefill wgmma kernel runs: `ss` (A and B from shared
/// memory, kernels/common/scores_wgmma.h; session 6's) or one of the A-in-registers kernels
/// (kernels/common/scores_wgrs.h): `rs128` / `rs256` (BN blocks per CTA), `p` = the next
/// item's A loaded during the MMAs, `s` = B in the 128-byte-swizzle layout, `o` = the two
/// warpgroups of a CTA take turns issuing their MMAs (ping-pong, named barriers).
pub const WG_KERNEL_SWITCH: &str = "QSA_SCORES_WG";
/// The values `QSA_SCORES_WG` takes, in `check_wg_kernel`'s message order.
pub const WG_KERNELS: [&str; 11] = [
    "ss", "rs128", "rs128p", "rs256", "rs256p", "rs128s", "rs128ps", "rs256s", "rs256ps", "rs256o",
    "rs256po",
];

/// A prefill wgmma kernel (`QSA_SCORES_WG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgKernel {
    /// `block_scores_{tf32,bf16}_wgmma`: A restaged through shared memory per 64-row unit.
    Ss,
    /// `block_scores_{tf32,bf16}_wgrs<bn>[p]`: A from registers, B resident.
    Rs {
        bn: usize,
        prefetch: bool,
        swizzle: bool,
        pingpong: bool,
    },
}

/// sm_90a's default per precision (TF32, BF16): the fastest and steadiest measured. H200,
/// bench/scores_vs_torch.py, median us (min..max) at 256 x 64 x 4096, three calls on
/// 2026-12-02: TF32 rs256 / **rs256o** 67.6 / - (06:08, /work/wt/results/wgsc2-1.md, rs256o not
/// yet built), 73.0 / 65.4 (06:50, call F1), 68.4 / 60.4 (08:22-08:29, call P,
/// /work/wt/results/p/sbs/scores-1); cuBLAS TF32 GEMM alone 95.9 / 92.5. BF16 rs256p /
/// **rs256ps**: 51.2 (49.2..56.0) / 50.4 (47.0..53.1) at 06:08; F1: rs256p's replays spread
/// 48.7-146.2 (median 93.1) while rs256ps stayed at 48.6 (48.2..50.5); P: 48.6 (47.9..53.1) /
/// 47.3 (46.7..48.8); cuBLAS BF16 alone 50.3 / 50.0. rs256o (ping-pong: the two warpgroups
/// take turns issuing their MMAs) won TF32 by 11-12% in both calls that ran it; rs256ps (B
/// swizzled, next A prefetched) was the faster or tied BF16 form in all three and never
/// spread. At 256 x 64 x 2048 (06:08): TF32 rs256 40.9, rs256s 40.9; BF16 rs256p 31.1,
/// rs256ps 31.6. H200.md's stability sweep (rounds of alternating order, cuBLAS as control)
/// is the check of both choices; a revert is this table's one line per precision.
pub const WG_KERNEL_DEFAULT: [WgKernel; 2] = [
    WgKernel::Rs {
        bn: 256,
        prefetch: false,
        swizzle: false,
        pingpong: true,
    },
    WgKernel::Rs {
        bn: 256,
        prefetch: true,
        swizzle: true,
        pingpong: false,
    },
];

/// The kernel `QSA_SCORES_WG` names (checked by `check_wg_kernel`), else the default of the
/// precision (`bf16`).
pub fn wg_kernel(sw: &Switches, bf16: bool) -> WgKernel {
    match sw.get(WG_KERNEL_SWITCH) {
        Some(v) if v != "ss" && WG_KERNELS.contains(&v) => {
            let rest = &v[2..];
            let bn = if rest.starts_with("128") { 128 } else { 256 };
            let flags = &rest[3..];
            WgKernel::Rs {
                bn,
                prefetch: flags.contains('p'),
                swizzle: flags.contains('s'),
                pingpong: flags.contains('o'),
            }
        }
        Some("ss") => WgKernel::Ss,
        _ => WG_KERNEL_DEFAULT[bf16 as usize],
    }
}

/// `QSA_SCORES_WG`'s value, before any work.
pub fn check_wg_kernel(sw: &Switches) -> Result<(), String> {
    match sw.get(WG_KERNEL_SWITCH) {
        Some(v) if !WG_KERNELS.contains(&v) => Err(format!(
            "{WG_KERNEL_SWITCH}={v}: expected one of {}",
            WG_KERNELS.join(", ")
        )),
        _ => Ok(()),
    }
}

/// Whether `caps`'s code object holds the wgmma scorers: the `#if defined(QSA_WGMMA)` around
/// them in kernels/block_scores.cu, which xtask builds where matrix.yaml lists `wgmma`
/// (sm_90 as sm_90a). Both must change together. A newer card running sm_90 through its PTX
/// (plain compute_90) lacks them.
pub fn wgmma_built(caps: &TargetCaps) -> bool {
    caps.vendor == Vendor::Nvidia && caps.has(Feature::Wgmma)
}

/// The engine of a TF32 / BF16 launch with CTA tile `tile`: wgmma for the wide (prefill)
/// tile where it is built, for the decode tile where it is built and wanted
/// (`decode_wg::wanted`), unless `QSA_SCORES_KERNEL=tf32_mma` / `bf16_mma` forces mma.sync.
pub fn tc_engine(caps: &TargetCaps, sw: &Switches, tile: TcTile) -> TcEngine {
    let forced_mma = sw
        .get(KERNEL_SWITCH)
        .is_some_and(|k| FORCE_MMA_SYNC.contains(&k));
    let wanted = match tile {
        TcTile::Wide => true,
        TcTile::Decode => super::decode_wg::wanted(sw),
    };
    if wgmma_built(caps) && wanted && !forced_mma {
        TcEngine::Wgmma
    } else {
        TcEngine::MmaSync
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nvidia(features: Vec<Feature>) -> TargetCaps {
        TargetCaps {
            name: "t".into(),
            vendor: Vendor::Nvidia,
            wave: 32,
            shared_per_block: 232_448,
            multiprocessors: 1,
            features,
        }
    }
    fn sw(kv: &[(&str, &str)]) -> Switches {
        Switches::from_pairs(kv)
    }

    #[test]
    fn wgmma_for_the_wide_tile_where_built_unless_forced_off() {
        let hopper = nvidia(vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Wgmma]);
        let ampere = nvidia(vec![Feature::Tf32Tc, Feature::Bf16Tc]);
        assert_eq!(tc_engine(&hopper, &sw(&[]), TcTile::Wide), TcEngine::Wgmma);
        assert_eq!(
            tc_engine(&hopper, &sw(&[]), TcTile::Decode),
            TcEngine::Wgmma
        );
        let mma = sw(&[(super::super::decode_wg::ENGINE_SWITCH, "mma")]);
        assert_eq!(tc_engine(&hopper, &mma, TcTile::Decode), TcEngine::MmaSync);
        // The decode tile's wgmma kernels: asked for, where built, unless mma.sync is forced.
        let dwg = sw(&[(super::super::decode_wg::ENGINE_SWITCH, "wgmma")]);
        assert_eq!(tc_engine(&hopper, &dwg, TcTile::Decode), TcEngine::Wgmma);
        assert_eq!(tc_engine(&ampere, &dwg, TcTile::Decode), TcEngine::MmaSync);
        let dwg_mma = sw(&[
            (super::super::decode_wg::ENGINE_SWITCH, "wgmma"),
            (KERNEL_SWITCH, "tf32_mma"),
        ]);
        assert_eq!(
            tc_engine(&hopper, &dwg_mma, TcTile::Decode),
            TcEngine::MmaSync
        );
        assert_eq!(
            tc_engine(&ampere, &sw(&[]), TcTile::Wide),
            TcEngine::MmaSync
        );
        for k in FORCE_MMA_SYNC {
            let forced = sw(&[(KERNEL_SWITCH, k)]);
            assert_eq!(tc_engine(&hopper, &forced, TcTile::Wide), TcEngine::MmaSync);
        }
        let tf32 = sw(&[(KERNEL_SWITCH, "tf32")]);
        assert_eq!(tc_engine(&hopper, &tf32, TcTile::Wide), TcEngine::Wgmma);
        // The feature on another vendor means nothing.
        let amd = TargetCaps {
            vendor: Vendor::Amd,
            ..hopper.clone()
        };
        assert!(!wgmma_built(&amd));
    }

    #[test]
    fn units_per_cta_default_and_forced_values_checked() {
        assert_eq!(wgmma_units_per_cta(&sw(&[])), None);
        let eight = sw(&[(WG_UPC_SWITCH, "8")]);
        assert_eq!(wgmma_units_per_cta(&eight), Some(8));
        assert!(check_wg_upc(&eight).is_ok());
        let e = check_wg_upc(&sw(&[(WG_UPC_SWITCH, "3")])).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_WG_UPC=3: expected 1, 2, 4, 8 or 16"),
            "{e}"
        );
    }

    #[test]
    fn wg_kernel_switch_values_and_default() {
        assert_eq!(wg_kernel(&sw(&[]), false), WG_KERNEL_DEFAULT[0]);
        assert_eq!(wg_kernel(&sw(&[]), true), WG_KERNEL_DEFAULT[1]);
        assert_eq!(
            wg_kernel(&sw(&[(WG_KERNEL_SWITCH, "ss")]), true),
            WgKernel::Ss
        );
        assert_eq!(
            wg_kernel(&sw(&[(WG_KERNEL_SWITCH, "rs256p")]), true),
            WgKernel::Rs {
                bn: 256,
                prefetch: true,
                swizzle: false,
                pingpong: false
            }
        );
        assert_eq!(
            wg_kernel(&sw(&[(WG_KERNEL_SWITCH, "rs256ps")]), true),
            WgKernel::Rs {
                bn: 256,
                prefetch: true,
                swizzle: true,
                pingpong: false
            }
        );
        assert_eq!(
            wg_kernel(&sw(&[(WG_KERNEL_SWITCH, "rs128")]), false),
            WgKernel::Rs {
                bn: 128,
                prefetch: false,
                swizzle: false,
                pingpong: false
            }
        );
        for v in WG_KERNELS {
            assert!(
                check_wg_kernel(&sw(&[(WG_KERNEL_SWITCH, v)])).is_ok(),
                "{v}"
            );
        }
        let e = check_wg_kernel(&sw(&[(WG_KERNEL_SWITCH, "rs64")])).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_WG=rs64: expected one of ss, rs128, rs128p, rs256, rs256p, rs128s, rs128ps, rs256s, rs256ps, rs256o, rs256po"),
            "{e}"
        );
    }

    #[test]
    fn auto_units_per_cta_picks_the_measured_best() {
        // The four H200 measurements: 256 queries of 64 heads = 256 units; BN 128 / 256.
        assert_eq!(auto_units_per_cta(256, 4096 / 128, 132), 16);
        assert_eq!(auto_units_per_cta(256, 4096 / 256, 132), 16);
        assert_eq!(auto_units_per_cta(256, 2048 / 128, 132), 16);
        assert_eq!(auto_units_per_cta(256, 2048 / 256, 132), 8);
        // Few units or few blocks: one unit per CTA.
        assert_eq!(auto_units_per_cta(3, 1, 132), 1);
    }
}

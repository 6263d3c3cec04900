//! Theoretical occupancy of one kernel on one target, from the target's `limits` in
//! matrix.yaml and the kernel's resources (registers, shared memory / LDS, block size).
//!
//! NVIDIA follows the CUDA occupancy calculator (`cuda_occupancy.h`): registers are allocated
//! per warp in units of `reg_alloc_unit` and split over the SM's sub-partitions; shared
//! memory per block is static + dynamic + the driver's per-block reservation, rounded to the
//! allocation granularity; the block count is the minimum of the register, shared-memory,
//! thread and block limits.
//!
//! AMD follows the GCN/CDNA/RDNA rules: VGPRs are allocated per wave in units of
//! `vgpr_alloc_unit` out of `vgprs_per_simd_lane` per SIMD lane (on gfx90a and later the
//! metadata's `.vgpr_count` is already the unified arch + acc total); a workgroup's waves
//! spread over the CU's SIMDs; LDS is per CU. SGPRs limit waves only where the target sets
//! `sgprs_per_simd` (GCN).
//!
//! Optional limit keys (with the default used when a target omits them):
//! `sub_partitions` (4), `reserved_shared_per_block` (1024 from sm_80 on, else 0),
//! `shared_alloc_unit` (128), `sgpr_alloc_unit` (16), `max_workgroups_per_cu` (no limit).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// What bounds the occupancy (the smallest of the per-resource limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    Registers,
    Sgprs,
    Shared,
    Threads,
    Blocks,
    /// The block cannot launch at all (too many registers, shared memory or threads).
    Unlaunchable,
}

impl Limiter {
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Registers => "regs",
            Limiter::Sgprs => "sgprs",
            Limiter::Shared => "shared",
            Limiter::Threads => "threads",
            Limiter::Blocks => "blocks",
            Limiter::Unlaunchable => "unlaunchable",
        }
    }
    pub fn parse(s: &str) -> Option<Limiter> {
        [
            Limiter::Registers,
            Limiter::Sgprs,
            Limiter::Shared,
            Limiter::Threads,
            Limiter::Blocks,
            Limiter::Unlaunchable,
        ]
        .into_iter()
        .find(|l| l.name() == s)
    }
}

/// Resident blocks (workgroups) and waves per SM (CU), and what limits them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupancy {
    /// Resident blocks per SM (NVIDIA) or workgroups per CU (AMD).
    pub blocks: u32,
    /// Resident warps per SM / waves per CU: the number the gate compares.
    pub waves: u32,
    /// The most warps per SM / waves per CU the hardware can hold.
    pub max_waves: u32,
    pub limiter: Limiter,
}

impl Occupancy {
    /// Resident waves as a share of the maximum, in whole percent (rounded down).
    pub fn percent(&self) -> u32 {
        if self.max_waves == 0 {
            0
        } else {
            (u64::from(self.waves) * 100 / u64::from(self.max_waves)) as u32
        }
    }
}

/// A limit key a target needs but matrix.yaml does not give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingLimit {
    pub target: String,
    pub key: &'static str,
}

impl fmt::Display for MissingLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "target `{}`: limits.{} is missing in matrix.yaml (needed for occupancy)",
            self.target, self.key
        )
    }
}

impl std::error::Error for MissingLimit {}

/// What an NVIDIA kernel uses, per thread and per block.
#[derive(Clone, Copy, Debug)]
pub struct NvidiaKernel {
    pub block: u32,
    pub regs: u32,
    /// Static shared memory as the binary records it (on sm_90 this already includes the
    /// shared memory the compiler reserves inside the kernel's section).
    pub static_shared: u32,
    pub dynamic_shared: u32,
}

/// What an AMD kernel uses, per lane, per wave and per workgroup.
#[derive(Clone, Copy, Debug)]
pub struct AmdKernel {
    pub block: u32,
    pub wave: u32,
    /// `.vgpr_count` (arch + acc on gfx90a and later).
    pub vgprs: u32,
    pub sgprs: u32,
    pub static_lds: u32,
    pub dynamic_lds: u32,
}

fn need(
    limits: &BTreeMap<String, u64>,
    target: &str,
    key: &'static str,
) -> Result<u64, MissingLimit> {
    limits.get(key).copied().ok_or(MissingLimit {
        target: target.to_string(),
        key,
    })
}

fn round_up(x: u64, unit: u64) -> u64 {
    if unit <= 1 {
        x
    } else {
        x.div_ceil(unit) * unit
    }
}

/// The sm number of an NVIDIA target name (`sm_90` -> 90), for defaults that depend on it.
fn sm_number(target: &str) -> Option<u64> {
    target.strip_prefix("sm_").and_then(|s| {
        s.trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse()
            .ok()
    })
}

/// Smallest of (limit, which) pairs; ties keep the first listed.
fn min_limit(limits: &[(u64, Limiter)]) -> (u64, Limiter) {
    let mut best = limits[0];
    for &l in &limits[1..] {
        if l.0 < best.0 {
            best = l;
        }
    }
    best
}

/// Occupancy of an NVIDIA kernel (cuda_occupancy.h's rules).
pub fn nvidia(
    target: &str,
    limits: &BTreeMap<String, u64>,
    k: NvidiaKernel,
) -> Result<Occupancy, MissingLimit> {
    const WARP: u64 = 32;
    let regs_per_sm = need(limits, target, "regs_per_sm")?;
    let max_threads = need(limits, target, "max_threads_per_sm")?;
    let max_blocks = need(limits, target, "max_blocks_per_sm")?;
    let shared_per_sm = need(limits, target, "shared_per_sm")?;
    let reg_unit = need(limits, target, "reg_alloc_unit")?;
    let max_regs = limits.get("max_regs_per_thread").copied().unwrap_or(255);
    let sub_partitions = limits.get("sub_partitions").copied().unwrap_or(4).max(1);
    let reserved = limits.get("reserved_shared_per_block").copied().unwrap_or(
        if sm_number(target).is_some_and(|n| n >= 80) {
            1024
        } else {
            0
        },
    );
    let shared_unit = limits.get("shared_alloc_unit").copied().unwrap_or(128);

    let max_warps = max_threads / WARP;
    let unlaunchable = Occupancy {
        blocks: 0,
        waves: 0,
        max_waves: max_warps as u32,
        limiter: Limiter::Unlaunchable,
    };
    let block = u64::from(k.block);
    if block == 0 || block > 1024 || u64::from(k.regs) > max_regs {
        return Ok(unlaunchable);
    }
    let warps_per_block = block.div_ceil(WARP);

    // Registers: allocated per warp, each sub-partition holds whole warps.
    let by_regs = if k.regs == 0 {
        max_blocks
    } else {
        let regs_per_warp = round_up(u64::from(k.regs) * WARP, reg_unit);
        if regs_per_warp * warps_per_block > regs_per_sm {
            return Ok(unlaunchable);
        }
        let warps_per_sub = (regs_per_sm / sub_partitions) / regs_per_warp;
        (warps_per_sub * sub_partitions) / warps_per_block
    };
    // Shared memory: static + dynamic + the driver's reservation, at allocation granularity.
    let smem = round_up(
        u64::from(k.static_shared) + u64::from(k.dynamic_shared) + reserved,
        shared_unit,
    );
    if smem > shared_per_sm {
        return Ok(unlaunchable);
    }
    let by_shared = shared_per_sm.checked_div(smem).unwrap_or(max_blocks);
    let by_threads = max_warps / warps_per_block;

    let (blocks, limiter) = min_limit(&[
        (by_regs, Limiter::Registers),
        (by_shared, Limiter::Shared),
        (by_threads, Limiter::Threads),
        (max_blocks, Limiter::Blocks),
    ]);
    if blocks == 0 {
        return Ok(Occupancy {
            limiter,
            ..unlaunchable
        });
    }
    Ok(Occupancy {
        blocks: blocks as u32,
        waves: (blocks * warps_per_block) as u32,
        max_waves: max_warps as u32,
        limiter,
    })
}

/// Occupancy of an AMD kernel (waves per SIMD from VGPRs / SGPRs, workgroups per CU from
/// waves and LDS).
pub fn amd(
    target: &str,
    limits: &BTreeMap<String, u64>,
    k: AmdKernel,
) -> Result<Occupancy, MissingLimit> {
    let vgprs_per_lane = need(limits, target, "vgprs_per_simd_lane")?;
    let vgpr_unit = need(limits, target, "vgpr_alloc_unit")?;
    let max_waves_simd = need(limits, target, "max_waves_per_simd")?;
    let simds = need(limits, target, "simds_per_cu")?;
    let lds_per_cu = need(limits, target, "lds_per_cu")?;
    let sgprs_per_simd = limits.get("sgprs_per_simd").copied().unwrap_or(0);
    let sgpr_unit = limits.get("sgpr_alloc_unit").copied().unwrap_or(16);
    let max_wgs = limits.get("max_workgroups_per_cu").copied();

    let max_waves_cu = max_waves_simd * simds;
    let unlaunchable = Occupancy {
        blocks: 0,
        waves: 0,
        max_waves: max_waves_cu as u32,
        limiter: Limiter::Unlaunchable,
    };
    let (block, wave) = (u64::from(k.block), u64::from(k.wave.max(1)));
    if block == 0 || block > 1024 {
        return Ok(unlaunchable);
    }
    let waves_per_wg = block.div_ceil(wave);

    let vgprs = round_up(u64::from(k.vgprs.max(1)), vgpr_unit);
    // Uncapped here: the wave-slot cap is its own limit (`by_waves`), so the limiter names
    // the resource that actually binds.
    let waves_simd_vgpr = vgprs_per_lane / vgprs;
    let waves_simd_sgpr = if sgprs_per_simd > 0 {
        sgprs_per_simd / round_up(u64::from(k.sgprs.max(1)), sgpr_unit)
    } else {
        max_waves_simd
    };
    // A workgroup's waves are spread over the CU's SIMDs, so the per-CU wave budget of each
    // limit bounds how many whole workgroups fit.
    let by_vgpr = (waves_simd_vgpr * simds) / waves_per_wg;
    let by_sgpr = (waves_simd_sgpr * simds) / waves_per_wg;
    let by_waves = max_waves_cu / waves_per_wg;
    let lds = u64::from(k.static_lds) + u64::from(k.dynamic_lds);
    if lds > lds_per_cu {
        return Ok(unlaunchable);
    }
    let by_lds = lds_per_cu.checked_div(lds).unwrap_or(u64::MAX);

    let mut candidates = vec![
        (by_vgpr, Limiter::Registers),
        (by_lds, Limiter::Shared),
        (by_waves, Limiter::Threads),
    ];
    if sgprs_per_simd > 0 {
        candidates.push((by_sgpr, Limiter::Sgprs));
    }
    if let Some(m) = max_wgs {
        candidates.push((m, Limiter::Blocks));
    }
    let (wgs, limiter) = min_limit(&candidates);
    if wgs == 0 {
        return Ok(Occupancy {
            limiter,
            ..unlaunchable
        });
    }
    Ok(Occupancy {
        blocks: wgs as u32,
        waves: (wgs * waves_per_wg) as u32,
        max_waves: max_waves_cu as u32,
        limiter,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    // matrix.yaml's sm_90 / sm_75 / gfx906 / gfx950 / gfx1201 limits.
    fn sm90() -> BTreeMap<String, u64> {
        limits(&[
            ("regs_per_sm", 65536),
            ("max_threads_per_sm", 2048),
            ("max_blocks_per_sm", 32),
            ("shared_per_sm", 233472),
            ("reg_alloc_unit", 256),
            ("max_regs_per_thread", 255),
        ])
    }
    fn sm75() -> BTreeMap<String, u64> {
        limits(&[
            ("regs_per_sm", 65536),
            ("max_threads_per_sm", 1024),
            ("max_blocks_per_sm", 16),
            ("shared_per_sm", 65536),
            ("reg_alloc_unit", 256),
            ("max_regs_per_thread", 255),
        ])
    }
    fn gfx906() -> BTreeMap<String, u64> {
        limits(&[
            ("vgprs_per_simd_lane", 256),
            ("vgpr_alloc_unit", 4),
            ("max_waves_per_simd", 10),
            ("simds_per_cu", 4),
            ("lds_per_cu", 65536),
            ("sgprs_per_simd", 800),
        ])
    }
    fn gfx950() -> BTreeMap<String, u64> {
        limits(&[
            ("vgprs_per_simd_lane", 512),
            ("vgpr_alloc_unit", 8),
            ("max_waves_per_simd", 8),
            ("simds_per_cu", 4),
            ("lds_per_cu", 163840),
            ("sgprs_per_simd", 0),
        ])
    }

    fn nv(block: u32, regs: u32, static_shared: u32, dynamic_shared: u32) -> NvidiaKernel {
        NvidiaKernel {
            block,
            regs,
            static_shared,
            dynamic_shared,
        }
    }

    #[test]
    fn nvidia_thread_limited() {
        // 256 threads, 16 regs: regs/warp = 512; 16384/512 = 32 warps per sub-partition,
        // 128 per SM -> 16 blocks; smem 2080+1024 = 3104 -> 3200 -> 72 blocks;
        // threads 64 warps / 8 = 8 blocks. 8 blocks x 8 warps = 64 of 64 warps.
        let o = nvidia("sm_90", &sm90(), nv(256, 16, 2080, 0)).unwrap();
        assert_eq!(
            o,
            Occupancy {
                blocks: 8,
                waves: 64,
                max_waves: 64,
                limiter: Limiter::Threads
            }
        );
        assert_eq!(o.percent(), 100);
    }

    #[test]
    fn nvidia_register_limited() {
        // 256 threads, 72 regs: 72*32 = 2304 regs/warp (a multiple of 256); 16384/2304 = 7
        // warps per sub-partition, 28 per SM -> 28/8 = 3 blocks = 24 warps of 64 (37%).
        let o = nvidia("sm_90", &sm90(), nv(256, 72, 0, 0)).unwrap();
        assert_eq!(
            o,
            Occupancy {
                blocks: 3,
                waves: 24,
                max_waves: 64,
                limiter: Limiter::Registers
            }
        );
        assert_eq!(o.percent(), 37);
        // 65 regs: 2080 -> 2304 after rounding to 256: the same as 72.
        assert_eq!(
            nvidia("sm_90", &sm90(), nv(256, 65, 0, 0)).unwrap().blocks,
            3
        );
        // 64 regs: 2048/warp, 8 warps per sub-partition -> 32 warps -> 4 blocks.
        assert_eq!(
            nvidia("sm_90", &sm90(), nv(256, 64, 0, 0)).unwrap().blocks,
            4
        );
    }

    #[test]
    fn nvidia_shared_limited_with_reservation() {
        // sm_90: 40000 static + 8000 dynamic + 1024 reserved = 49024 -> 49024 (128-aligned:
        // 383 * 128) -> 233472 / 49024 = 4 blocks.
        let o = nvidia("sm_90", &sm90(), nv(128, 32, 40000, 8000)).unwrap();
        assert_eq!(
            o,
            Occupancy {
                blocks: 4,
                waves: 16,
                max_waves: 64,
                limiter: Limiter::Shared
            }
        );
        // sm_75 reserves nothing: 16384 -> 65536/16384 = 4 blocks; one byte more -> 3.
        assert_eq!(
            nvidia("sm_75", &sm75(), nv(128, 32, 16384, 0))
                .unwrap()
                .blocks,
            4
        );
        assert_eq!(
            nvidia("sm_75", &sm75(), nv(128, 32, 16385, 0))
                .unwrap()
                .blocks,
            3
        );
        // An explicit reservation in limits overrides the default.
        let mut l = sm90();
        l.insert("reserved_shared_per_block".into(), 0);
        assert_eq!(
            nvidia("sm_90", &l, nv(128, 32, 58368, 0)).unwrap().blocks,
            4
        );
        assert_eq!(
            nvidia("sm_90", &sm90(), nv(128, 32, 58368, 0))
                .unwrap()
                .blocks,
            3
        );
    }

    #[test]
    fn nvidia_block_limit_and_unlaunchable() {
        // 32-thread blocks, few regs: 64 warps would allow 64 blocks; the SM holds 32.
        let o = nvidia("sm_90", &sm90(), nv(32, 8, 0, 0)).unwrap();
        assert_eq!((o.blocks, o.waves, o.limiter), (32, 32, Limiter::Blocks));
        // 1024 threads x 255 regs cannot launch (32 warps x 8192 regs > 65536).
        let o = nvidia("sm_90", &sm90(), nv(1024, 255, 0, 0)).unwrap();
        assert_eq!((o.blocks, o.limiter), (0, Limiter::Unlaunchable));
        // More shared memory than the SM has.
        assert_eq!(
            nvidia("sm_75", &sm75(), nv(64, 8, 70000, 0))
                .unwrap()
                .limiter,
            Limiter::Unlaunchable
        );
        // A missing limit is an error naming the key.
        let mut l = sm90();
        l.remove("regs_per_sm");
        let e = nvidia("sm_90", &l, nv(64, 8, 0, 0)).unwrap_err();
        assert_eq!(e.key, "regs_per_sm");
        assert!(e.to_string().contains("sm_90"));
    }

    fn amdk(block: u32, wave: u32, vgprs: u32, sgprs: u32, lds: u32, dyn_lds: u32) -> AmdKernel {
        AmdKernel {
            block,
            wave,
            vgprs,
            sgprs,
            static_lds: lds,
            dynamic_lds: dyn_lds,
        }
    }

    #[test]
    fn amd_gfx906_vgpr_limited() {
        // 256 threads = 4 waves; 40 VGPRs -> 256/40 = 6 waves/SIMD -> 24 waves/CU -> 6 WGs.
        let o = amd("gfx906", &gfx906(), amdk(256, 64, 40, 20, 0, 0)).unwrap();
        assert_eq!(
            o,
            Occupancy {
                blocks: 6,
                waves: 24,
                max_waves: 40,
                limiter: Limiter::Registers
            }
        );
        assert_eq!(o.percent(), 60);
        // 12 VGPRs would allow 21 waves/SIMD; the 10 wave slots bind: 40/CU -> 10 WGs.
        let o = amd("gfx906", &gfx906(), amdk(256, 64, 12, 27, 1040, 0)).unwrap();
        assert_eq!((o.blocks, o.waves, o.limiter), (10, 40, Limiter::Threads));
    }

    #[test]
    fn amd_gfx906_sgpr_and_lds_limited() {
        // 102 SGPRs -> 112 -> 800/112 = 7 waves/SIMD -> 28/CU -> 7 WGs of 4 waves.
        let o = amd("gfx906", &gfx906(), amdk(256, 64, 8, 102, 0, 0)).unwrap();
        assert_eq!((o.blocks, o.waves, o.limiter), (7, 28, Limiter::Sgprs));
        // 20 KiB of LDS: 65536/20480 = 3 WGs.
        let o = amd("gfx906", &gfx906(), amdk(256, 64, 8, 16, 16384, 4096)).unwrap();
        assert_eq!((o.blocks, o.waves, o.limiter), (3, 12, Limiter::Shared));
        // 1024 threads of 64 = 16 waves; 128 VGPRs -> 2 waves/SIMD = 8/CU < 16: unlaunchable.
        let o = amd("gfx906", &gfx906(), amdk(1024, 64, 128, 16, 0, 0)).unwrap();
        assert_eq!((o.blocks, o.limiter), (0, Limiter::Registers));
    }

    #[test]
    fn amd_gfx950_unified_registers() {
        // 512 VGPRs per lane, unit 8: 100 -> 104 -> 4 waves/SIMD -> 16/CU; 256 threads are
        // 4 waves -> 4 WGs; SGPRs do not limit (sgprs_per_simd 0).
        let o = amd("gfx950", &gfx950(), amdk(256, 64, 100, 100, 0, 0)).unwrap();
        assert_eq!(
            o,
            Occupancy {
                blocks: 4,
                waves: 16,
                max_waves: 32,
                limiter: Limiter::Registers
            }
        );
        assert_eq!(o.percent(), 50);
    }

    #[test]
    fn amd_gfx1201_wave32() {
        let l = limits(&[
            ("vgprs_per_simd_lane", 1536),
            ("vgpr_alloc_unit", 8),
            ("max_waves_per_simd", 16),
            ("simds_per_cu", 2),
            ("lds_per_cu", 131072),
            ("sgprs_per_simd", 0),
        ]);
        // 256 threads of 32 = 8 waves; 12 VGPRs -> 16 -> 96 waves/SIMD, but only 16 wave
        // slots: 32/CU -> 4 WGs; LDS 1040 does not limit.
        let o = amd("gfx1201", &l, amdk(256, 32, 12, 30, 1040, 0)).unwrap();
        assert_eq!(
            o,
            Occupancy {
                blocks: 4,
                waves: 32,
                max_waves: 32,
                limiter: Limiter::Threads
            }
        );
        // 200 VGPRs -> 7 waves/SIMD -> 14/CU -> 1 WG of 8 waves.
        let o = amd("gfx1201", &l, amdk(256, 32, 200, 30, 0, 0)).unwrap();
        assert_eq!((o.blocks, o.waves), (1, 8));
    }

    #[test]
    fn limiter_names_round_trip() {
        for l in [
            Limiter::Registers,
            Limiter::Sgprs,
            Limiter::Shared,
            Limiter::Threads,
            Limiter::Blocks,
            Limiter::Unlaunchable,
        ] {
            assert_eq!(Limiter::parse(l.name()), Some(l));
        }
    }
}

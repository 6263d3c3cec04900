//! The wgmma decode scorers (`block_scores_{tf32,bf16}_decode_wg`,
//! kernels/common/scores_decode_wg.h, sm_90a only): whether a decode call takes them instead
//! of the mma.sync decode kernels, and their launch configuration (persistent CTAs per
//! multiprocessor). Pure.

use super::super::Switches;
use super::decode::{ctas_per_sm, grid_fill, mma_only_switch, GridFill, CTAS_SWITCH};

/// `QSA_SCORES_DECODE_ENGINE`: `mma` (the mma.sync decode kernels) or `wgmma` (these, where
/// the code object has them; elsewhere the switch falls back to mma.sync, as a forced kernel
/// the target lacks does).
pub const ENGINE_SWITCH: &str = "QSA_SCORES_DECODE_ENGINE";

/// Whether a decode call on a target with the wgmma kernels takes them when no switch says:
/// yes. Measured on the H200 (2026-12-02 06:07 UTC, call A1, bench/scores_vs_torch.py, 1 x 64
/// x 262,144, median us): tf32_decode_wg 43.9 (72% of HBM) against the mma.sync tf32_decode
/// 54.7 in the same run; bf16_decode_wg 44.9 against 47.6. The runner (qsa run, one call
/// timed alone): 47.0 against 56.5. `QSA_SCORES_DECODE_ENGINE=mma` keeps mma.sync.
pub const WGMMA_BY_DEFAULT: bool = true;

/// CTAs per multiprocessor when no switch says otherwise: what the kernels' registers allow
/// (250 TF32 / 236 BF16 per thread at 128 threads, nvcc 13.0.88, 2026-12-02: two CTAs, 64K
/// registers per SM). Measured on the H200 (call A1, 1 x 64 x 262,144, median us): TF32 1 /
/// 2 / 3 CTAs per SM 61.7 / 43.9 / 54.7 (3: a second, partial wave); BF16 1 / 2: 53.4 / 44.9.
pub const DEFAULT_CTAS_PER_SM: usize = 2;

/// Most query groups (grid.y: each group's CTAs stream all of Kb) for which a TF32 call takes
/// the wgmma decode kernel instead of the wide tile (`scores::tc_tile_on`). Measured on the
/// H200 (2026-12-02 call A1, bench/scores_vs_torch.py, queries x 64 heads x 262,144 blocks,
/// median us): 2 queries 68.0 against the wide tile's 123.0 (tf32_wgmma, the dispatch's
/// choice then; the register-source wide kernels of branch wgsc2 ran 108.8 at best in the
/// same call); 4 queries 117.6 against 196.9, but 115.1 for wgsc2's best: a tie, left to the
/// wide tile. BF16 was not measured past one group: it keeps `decode::MAX_GROUPS`.
pub const MAX_GROUPS_TF32: usize = 2;

/// Blocks per tile: the wgmma's M (DWG_M).
pub const TILE_BLOCKS: usize = 64;
/// Threads per warpgroup (DWG_THREADS); a CTA has `warpgroups` of them.
pub const THREADS: usize = 128;

/// `QSA_SCORES_DECODE_WG_RING`: `regs` (two tiles of A in registers: `_decode_wg`, the
/// default) or 2 ..= 6 (`_decode_wgc`: that many tiles per warpgroup in a per-thread cp.async
/// ring in shared memory, stages - 1 in flight during a tile's MMAs, 164 registers).
pub const RING_SWITCH: &str = "QSA_SCORES_DECODE_WG_RING";
/// `QSA_SCORES_DECODE_WG_GROUPS`: warpgroups per CTA, 1 (default) or 2 (`_decode_wgc2`: two
/// streamers sharing one copy of Q; needs a ring).
pub const GROUPS_SWITCH: &str = "QSA_SCORES_DECODE_WG_GROUPS";
/// `QSA_SCORES_DECODE_WG_TMA`: `off` (default) or 2 ..= 6 (`_decode_tma`, `_decode_tma2` with
/// 2 warpgroups: a producer warp streams whole tiles by TMA bulk copies into a ring of that
/// many slots with mbarriers, kernels/common/scores_decode_tma.h). Excludes `RING_SWITCH`.
pub const TMA_SWITCH: &str = "QSA_SCORES_DECODE_WG_TMA";
/// Bytes of the TMA kernels' mbarriers per ring slot (full + empty, 8 B each).
pub const TMA_BARRIER_BYTES: usize = 16;
/// The ring kernels' wait takes at most `stages - 2` = 4 pending groups (dec_wait_pending).
pub const MAX_RING: usize = 6;
/// Bytes of one ring slot: one tile of A, 64 blocks x 128 f32 (DWG_RING_SLOT float4).
pub const RING_SLOT_BYTES: usize = TILE_BLOCKS * 128 * 4;
/// Shared memory of one sm_90 multiprocessor (228 KiB), and what the driver reserves per CTA
/// (1 KiB): the CTAs per SM a configuration can keep resident.
pub const SM90_SHARED_PER_SM: usize = 233_472;
pub const SHARED_RESERVED_PER_CTA: usize = 1024;
/// What the wgmma decode kernels' registers allow per SM: 2 CTAs (249 / 236 registers for
/// the register kernels, 164 / 161 for the ring ones at 128 threads: 3 would fit the
/// registers, but no ring of 2+ tiles fits 3 CTAs' shared memory).
const MAX_CTAS_BY_REGISTERS: usize = 2;

/// `QSA_SCORES_DECODE_ENGINE`'s value, before any work.
pub fn check_engine(sw: &Switches) -> Result<(), String> {
    match sw.get(ENGINE_SWITCH) {
        None | Some("mma" | "wgmma") => Ok(()),
        Some(other) => Err(format!("{ENGINE_SWITCH}={other}: expected mma or wgmma")),
    }
}

/// `RING_SWITCH`: None for `regs` (or unset), else the ring depth.
fn ring(sw: &Switches) -> Result<Option<usize>, String> {
    match sw.get(RING_SWITCH) {
        None | Some("regs") => Ok(None),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (2..=MAX_RING).contains(&n) => Ok(Some(n)),
            _ => Err(format!(
                "{RING_SWITCH}={v}: expected regs or 2 to {MAX_RING}"
            )),
        },
    }
}

/// The default form per precision when `TMA_SWITCH` is unset (and no cp.async ring is asked
/// for): `(slots, warpgroups)` of the TMA ring, or None for the register kernel. Measured on the
/// H200 (session 9, call A, docs/results/session9-2026-12-02/a/), 1 x 64 x 262,144:
/// - TF32: 4 slots, 2 consumer warpgroups (`_decode_tma2`): 43.6 us against the register
///   kernel's 46.3 in the side by side (72% against 68% of 4.3 TB/s), 44.1 against 47.5 us in
///   the runner's bench, 44.1 against 47.9 in the first sweep (2 slots): 6-8% faster each time.
/// - BF16: the register kernel: its TMA forms measured 42.4-43.1 against 43.7 us in the side by
///   side (within 1-3%, and not the same form each sweep), 41.8 against 45.0 in the runner.
pub const DEFAULT_TMA_TF32: Option<(usize, usize)> = Some((4, 2));
pub const DEFAULT_TMA_BF16: Option<(usize, usize)> = None;

fn default_tma(bf16: bool) -> Option<(usize, usize)> {
    if bf16 {
        DEFAULT_TMA_BF16
    } else {
        DEFAULT_TMA_TF32
    }
}

/// `TMA_SWITCH`: None for `off`, the ring's slots for 2 ..= 6, the precision's default
/// (`default_tma`) when unset and no cp.async ring is asked for.
fn tma(sw: &Switches, bf16: bool) -> Result<Option<usize>, String> {
    match sw.get(TMA_SWITCH) {
        None if sw.get(RING_SWITCH).is_some() => Ok(None),
        None => Ok(default_tma(bf16).map(|(slots, _)| slots)),
        Some("off") => Ok(None),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (2..=MAX_RING).contains(&n) => Ok(Some(n)),
            _ => Err(format!("{TMA_SWITCH}={v}: expected off or 2 to {MAX_RING}")),
        },
    }
}

/// `GROUPS_SWITCH`: warpgroups per CTA; when unset, the default form's where the TMA ring is
/// the default one (TMA and ring switches unset), else 1.
fn warpgroups(sw: &Switches, bf16: bool) -> Result<usize, String> {
    match sw.get(GROUPS_SWITCH) {
        None if sw.get(TMA_SWITCH).is_none() && sw.get(RING_SWITCH).is_none() => {
            Ok(default_tma(bf16).map_or(1, |(_, groups)| groups))
        }
        None | Some("1") => Ok(1),
        Some("2") => Ok(2),
        Some(v) => Err(format!("{GROUPS_SWITCH}={v}: expected 1 or 2")),
    }
}

/// This engine's switches (engine, ring, warpgroups), before any work.
pub fn check_switches(sw: &Switches) -> Result<(), String> {
    check_engine(sw)?;
    ring(sw)?;
    tma(sw, false)?;
    warpgroups(sw, false)?;
    Ok(())
}

/// Whether a wgmma-only switch (ring, warpgroups) is set: the mma.sync decode kernels
/// refuse them (`decode::config_for`).
pub fn wgmma_only_switch(sw: &Switches) -> Option<&'static str> {
    [RING_SWITCH, GROUPS_SWITCH, TMA_SWITCH]
        .into_iter()
        .find(|k| sw.get(k).is_some())
}

/// Whether the switches (or the default) ask for the wgmma decode kernels.
pub fn wanted(sw: &Switches) -> bool {
    match sw.get(ENGINE_SWITCH) {
        Some("wgmma") => true,
        Some(_) => false,
        None => WGMMA_BY_DEFAULT,
    }
}

/// One launch configuration of the wgmma decode scorers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WgDecodeConfig {
    /// Persistent CTAs per multiprocessor (grid.x = multiprocessors x this / query groups).
    pub ctas_per_sm: usize,
    /// None: A in registers (`_decode_wg`); Some(n): an n-tile cp.async ring per warpgroup.
    pub ring: Option<usize>,
    /// Warpgroups per CTA (1, or 2 with a ring: `_decode_wgc2`, or with TMA: `_decode_tma2`).
    pub warpgroups: usize,
    /// Some(n): A streamed by a TMA producer warp through an n-slot mbarrier ring
    /// (`_decode_tma`, consumers `warpgroups`); excludes `ring`.
    pub tma: Option<usize>,
    /// How the persistent grid is sized.
    pub fill: GridFill,
}

impl WgDecodeConfig {
    /// The register kernel with `ctas_per_sm` CTAs per SM and the full grid.
    pub const fn regs(ctas_per_sm: usize) -> Self {
        WgDecodeConfig {
            ctas_per_sm,
            ring: None,
            warpgroups: 1,
            tma: None,
            fill: GridFill::Full,
        }
    }
    /// Dynamic shared memory: Q (64 rows x 128) in the operand format, 4 (TF32) or 2 (BF16)
    /// bytes per element, then each warpgroup's ring.
    /// With TMA: Q, the CTA's one ring, its mbarriers.
    pub fn shared_bytes(&self, bf16: bool) -> usize {
        let q = 64 * 128 * if bf16 { 2 } else { 4 };
        match self.tma {
            Some(n) => q + n * (RING_SLOT_BYTES + TMA_BARRIER_BYTES),
            None => q + self.warpgroups * self.ring.unwrap_or(0) * RING_SLOT_BYTES,
        }
    }
    /// Threads per CTA (TMA: the consumers' warpgroups and the producer warp).
    pub fn threads(&self) -> usize {
        THREADS * self.warpgroups + if self.tma.is_some() { 32 } else { 0 }
    }
    /// Streamers per CTA, each walking its own tiles: the warpgroups of a cp.async ring
    /// kernel, else the CTA (the TMA kernels' consumers share the CTA's tiles).
    pub fn streamers(&self) -> usize {
        if self.tma.is_some() {
            1
        } else {
            self.warpgroups
        }
    }
    /// CTAs per SM that the registers allow (the kernels' launch bounds: TMA with one
    /// warpgroup (160, 2), with two (288, 1)).
    fn by_registers(&self) -> usize {
        if self.tma.is_some() && self.warpgroups > 1 {
            1
        } else {
            MAX_CTAS_BY_REGISTERS
        }
    }
    /// CTAs of this configuration that one sm_90 SM's shared memory holds.
    pub fn resident_per_sm(&self, bf16: bool) -> usize {
        SM90_SHARED_PER_SM / (self.shared_bytes(bf16) + SHARED_RESERVED_PER_CTA)
    }
    /// (entry point, variant) for TF32 or BF16.
    pub fn kernel(&self, bf16: bool) -> (&'static str, &'static str) {
        if self.tma.is_some() {
            return match (bf16, self.warpgroups) {
                (false, 1) => ("block_scores_tf32_decode_tma", "tf32_decode_tma"),
                (true, 1) => ("block_scores_bf16_decode_tma", "bf16_decode_tma"),
                (false, _) => ("block_scores_tf32_decode_tma2", "tf32_decode_tma2"),
                (true, _) => ("block_scores_bf16_decode_tma2", "bf16_decode_tma2"),
            };
        }
        match (bf16, self.ring.is_some(), self.warpgroups) {
            (false, false, _) => ("block_scores_tf32_decode_wg", "tf32_decode_wg"),
            (true, false, _) => ("block_scores_bf16_decode_wg", "bf16_decode_wg"),
            (false, true, 1) => ("block_scores_tf32_decode_wgc", "tf32_decode_wgc"),
            (true, true, 1) => ("block_scores_bf16_decode_wgc", "bf16_decode_wgc"),
            (false, true, _) => ("block_scores_tf32_decode_wgc2", "tf32_decode_wgc2"),
            (true, true, _) => ("block_scores_bf16_decode_wgc2", "bf16_decode_wgc2"),
        }
    }
    /// Arguments past the common seven: the ring depth of the ring and TMA kernels.
    pub fn extra_args(&self) -> Vec<i32> {
        self.ring
            .or(self.tma)
            .map(|n| vec![n as i32])
            .unwrap_or_default()
    }
}

/// The configuration of a TF32 (`bf16` false) or BF16 call from the switches: the ring
/// (`RING_SWITCH`, else A in registers), warpgroups per CTA (`GROUPS_SWITCH`), the grid
/// (`decode::GRID_SWITCH`) and CTAs per SM (`QSA_SCORES_DECODE_CTAS_PER_SM`, else
/// `DEFAULT_CTAS_PER_SM` for the register kernel and, for a ring, as many as the SM's shared
/// memory holds, at most 2). The mma.sync kernels' ring depth and warps mean nothing here: a
/// call that sets them is refused, naming the switch and the fix; so is a configuration
/// whose CTAs per SM cannot be resident together (the grid would run a second wave).
pub fn config_for(sw: &Switches, bf16: bool) -> Result<WgDecodeConfig, String> {
    if let Some(k) = mma_only_switch(sw) {
        return Err(format!(
            "{k} configures the mma.sync decode scorer, and this call runs the wgmma one; set {ENGINE_SWITCH}=mma to sweep it, or drop {k} (the wgmma one takes {CTAS_SWITCH}, {RING_SWITCH}, {GROUPS_SWITCH})"
        ));
    }
    check_switches(sw)?;
    let mut c = WgDecodeConfig {
        ring: ring(sw)?,
        tma: tma(sw, bf16)?,
        warpgroups: warpgroups(sw, bf16)?,
        fill: grid_fill(sw)?,
        ..WgDecodeConfig::regs(DEFAULT_CTAS_PER_SM)
    };
    if c.ring.is_some() && c.tma.is_some() {
        return Err(format!(
            "{RING_SWITCH} and {TMA_SWITCH} are two ways to stage A (per-thread cp.async or a TMA producer); set one of them"
        ));
    }
    let staged = c.ring.or(c.tma);
    if c.warpgroups > 1 && staged.is_none() {
        return Err(format!(
            "{GROUPS_SWITCH}={}: two warpgroups per CTA stream through rings; set {RING_SWITCH} or {TMA_SWITCH} to 2 .. {MAX_RING} too",
            c.warpgroups
        ));
    }
    let resident = c.resident_per_sm(bf16);
    if resident == 0 {
        return Err(format!(
            "{0}={1} with {2} warpgroup(s) needs {3} B of shared memory per CTA, an sm_90 SM holds {SM90_SHARED_PER_SM}; lower {0}",
            if c.tma.is_some() { TMA_SWITCH } else { RING_SWITCH },
            staged.unwrap_or(0),
            c.warpgroups,
            c.shared_bytes(bf16)
        ));
    }
    c.ctas_per_sm = match ctas_per_sm(sw)? {
        Some(n) if staged.is_some() && n > resident => {
            return Err(format!(
                "{CTAS_SWITCH}={n} with {}={}: {n} CTAs x ({} + {SHARED_RESERVED_PER_CTA}) B exceed an sm_90 SM's {SM90_SHARED_PER_SM} B of shared memory (at most {resident} resident, the rest a second wave); lower one of them",
                if c.tma.is_some() { TMA_SWITCH } else { RING_SWITCH },
                staged.unwrap_or(0),
                c.shared_bytes(bf16)
            ))
        }
        Some(n) => n,
        None if staged.is_some() => resident.min(c.by_registers()),
        None => DEFAULT_CTAS_PER_SM,
    };
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(kv: &[(&str, &str)]) -> Switches {
        Switches::from_pairs(kv)
    }

    #[test]
    fn tf32_defaults_to_the_tma_ring_with_two_consumers_and_bf16_to_the_register_kernel() {
        // The card's measurement (DEFAULT_TMA_TF32's comment): TF32 4 slots x 2 warpgroups.
        let tf32 = config_for(&sw(&[]), false).unwrap();
        assert_eq!(
            (tf32.tma, tf32.ring, tf32.warpgroups),
            (Some(4), None, 2),
            "{tf32:?}"
        );
        let bf16 = config_for(&sw(&[]), true).unwrap();
        assert_eq!(
            (bf16.tma, bf16.ring, bf16.warpgroups),
            (None, None, 1),
            "{bf16:?}"
        );
        // `off` keeps the register kernel (the matrix variant tf32_decode_wg), and an explicit
        // ring or slot count takes one warpgroup unless GROUPS says otherwise.
        let off = config_for(&sw(&[(TMA_SWITCH, "off")]), false).unwrap();
        assert_eq!((off.tma, off.warpgroups), (None, 1), "{off:?}");
        let two = config_for(&sw(&[(TMA_SWITCH, "2")]), false).unwrap();
        assert_eq!((two.tma, two.warpgroups), (Some(2), 1), "{two:?}");
        let ring = config_for(&sw(&[(RING_SWITCH, "2")]), false).unwrap();
        assert_eq!(
            (ring.tma, ring.ring, ring.warpgroups),
            (None, Some(2), 1),
            "{ring:?}"
        );
    }

    #[test]
    fn engine_switch_picks_and_refuses_unknown_values() {
        assert_eq!(wanted(&sw(&[])), WGMMA_BY_DEFAULT);
        assert!(wanted(&sw(&[(ENGINE_SWITCH, "wgmma")])));
        assert!(!wanted(&sw(&[(ENGINE_SWITCH, "mma")])));
        assert!(check_engine(&sw(&[(ENGINE_SWITCH, "mma")])).is_ok());
        let e = check_engine(&sw(&[(ENGINE_SWITCH, "tma")])).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_DECODE_ENGINE=tma: expected mma or wgmma"),
            "{e}"
        );
    }

    #[test]
    fn config_takes_ctas_per_sm_and_refuses_the_ring_switches() {
        // The register kernel (TF32's default is the TMA ring since session 9: pinned off).
        let regs = sw(&[(TMA_SWITCH, "off")]);
        assert_eq!(config_for(&regs, false).unwrap().ctas_per_sm, 2);
        let four = sw(&[(CTAS_SWITCH, "4"), (TMA_SWITCH, "off")]);
        assert_eq!(config_for(&four, false).unwrap().ctas_per_sm, 4);
        let e = config_for(&sw(&[(CTAS_SWITCH, "5")]), false).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_DECODE_CTAS_PER_SM=5: expected 1 to 4"),
            "{e}"
        );
        let e = config_for(&sw(&[("QSA_SCORES_DECODE_STAGES", "3")]), false).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_DECODE_STAGES configures the mma.sync decode scorer")
                && e.contains("QSA_SCORES_DECODE_ENGINE=mma"),
            "{e}"
        );
        assert_eq!(WgDecodeConfig::regs(2).shared_bytes(false), 32_768);
        assert_eq!(WgDecodeConfig::regs(2).shared_bytes(true), 16_384);
    }

    /// The ring kernels: depth, warpgroups and CTAs per SM from the switches and what an
    /// sm_90 SM's shared memory holds; every impossible combination refused by name.
    #[test]
    fn ring_configs_fit_the_sm_or_are_refused() {
        let cfg = |kv: &[(&str, &str)], bf16| config_for(&sw(kv), bf16);
        // TF32, 2 tiles: Q 32 KiB + 64 KiB, two per SM (2 x 99,328 <= 233,472).
        let c = cfg(&[(RING_SWITCH, "2")], false).unwrap();
        assert_eq!((c.ring, c.warpgroups, c.ctas_per_sm), (Some(2), 1, 2));
        assert_eq!(
            (c.shared_bytes(false), c.kernel(false).0),
            (98_304, "block_scores_tf32_decode_wgc")
        );
        assert_eq!(c.extra_args(), vec![2]);
        // TF32, 3 tiles: one per SM; BF16 (Q 16 KiB), 3 tiles: still two.
        assert_eq!(cfg(&[(RING_SWITCH, "3")], false).unwrap().ctas_per_sm, 1);
        assert_eq!(cfg(&[(RING_SWITCH, "3")], true).unwrap().ctas_per_sm, 2);
        // Two warpgroups of 3 tiles: 32 KiB + 6 x 32 KiB = 229,376 B, one CTA of 256 threads.
        let c = cfg(&[(RING_SWITCH, "3"), (GROUPS_SWITCH, "2")], false).unwrap();
        assert_eq!(
            (c.shared_bytes(false), c.threads(), c.ctas_per_sm),
            (229_376, 256, 1)
        );
        assert_eq!(
            c.kernel(true),
            ("block_scores_bf16_decode_wgc2", "bf16_decode_wgc2")
        );
        // Refusals: a ring that fits no SM, CTAs that cannot be resident, groups without a ring,
        // values out of range.
        let e = cfg(&[(RING_SWITCH, "4"), (GROUPS_SWITCH, "2")], false).unwrap_err();
        assert!(
            e.contains("needs 294912 B of shared memory per CTA")
                && e.contains("lower QSA_SCORES_DECODE_WG_RING"),
            "{e}"
        );
        let e = cfg(&[(RING_SWITCH, "3"), (CTAS_SWITCH, "2")], false)
            .expect_err("2 CTAs of a 3-tile TF32 ring (2 x 132 KiB) cannot be resident on one SM");
        assert!(
            e.contains("QSA_SCORES_DECODE_CTAS_PER_SM=2 with QSA_SCORES_DECODE_WG_RING=3")
                && e.contains("at most 1 resident"),
            "{e}"
        );
        let e = cfg(&[(GROUPS_SWITCH, "2"), (TMA_SWITCH, "off")], false).unwrap_err();
        assert!(
            e.contains("set QSA_SCORES_DECODE_WG_RING or QSA_SCORES_DECODE_WG_TMA to 2 .. 6 too"),
            "{e}"
        );
        for (k, v, want) in [
            (RING_SWITCH, "1", "expected regs or 2 to 6"),
            (RING_SWITCH, "7", "expected regs or 2 to 6"),
            (GROUPS_SWITCH, "3", "expected 1 or 2"),
            ("QSA_SCORES_DECODE_GRID", "half", "expected full or even"),
        ] {
            let e = super::super::decode::check_switches(&sw(&[(k, v)])).unwrap_err();
            assert!(e.contains(&format!("{k}={v}: {want}")), "{e}");
        }
        // The register kernel keeps its CTAs per SM (3 and 4 allowed: a measured second wave).
        assert_eq!(
            cfg(&[(RING_SWITCH, "regs"), (CTAS_SWITCH, "3")], false)
                .unwrap()
                .ctas_per_sm,
            3
        );
    }

    /// The TMA kernels: one ring per CTA plus its mbarriers, a producer warp, the CTA as the
    /// one streamer; refused with the cp.async ring and past the SM's shared memory.
    #[test]
    fn tma_configs_fit_the_sm_or_are_refused() {
        let cfg = |kv: &[(&str, &str)], bf16| config_for(&sw(kv), bf16);
        let c = cfg(&[(TMA_SWITCH, "2")], false).unwrap();
        assert_eq!(
            (
                c.shared_bytes(false),
                c.threads(),
                c.ctas_per_sm,
                c.streamers()
            ),
            (98_336, 160, 2, 1)
        );
        assert_eq!(
            (c.kernel(false).0, c.extra_args()),
            ("block_scores_tf32_decode_tma", vec![2])
        );
        // 4 slots: 32 KiB + 4 x 32 KiB + 64 B, one CTA per SM.
        assert_eq!(cfg(&[(TMA_SWITCH, "4")], false).unwrap().ctas_per_sm, 1);
        // BF16, 3 slots: two CTAs (2 x (114,736 + 1,024) <= 233,472).
        assert_eq!(cfg(&[(TMA_SWITCH, "3")], true).unwrap().ctas_per_sm, 2);
        // Two consumer warpgroups: 288 threads, one CTA by the registers even where two fit.
        let c = cfg(&[(TMA_SWITCH, "2"), (GROUPS_SWITCH, "2")], true).unwrap();
        assert_eq!(
            (c.threads(), c.ctas_per_sm, c.kernel(true).1),
            (288, 1, "bf16_decode_tma2")
        );
        let e = cfg(&[(TMA_SWITCH, "3"), (RING_SWITCH, "3")], false).unwrap_err();
        assert!(e.contains("set one of them"), "{e}");
        let e = cfg(&[(TMA_SWITCH, "7")], false).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_DECODE_WG_TMA=7: expected off or 2 to 6"),
            "{e}"
        );
        let e = cfg(&[(TMA_SWITCH, "6"), (CTAS_SWITCH, "2")], false).unwrap_err();
        assert!(
            e.contains("with QSA_SCORES_DECODE_WG_TMA=6") && e.contains("at most 1 resident"),
            "{e}"
        );
        assert_eq!(
            cfg(&[(TMA_SWITCH, "off")], false).unwrap(),
            WgDecodeConfig::regs(2)
        );
    }
}

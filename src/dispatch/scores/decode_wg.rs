//! The wgmma decode scorers (`block_scores_{tf32,bf16}_decode_wg`,
//! kernels/common/scores_decode_wg.h, sm_90a only): whether a decode call takes them instead
//! of the mma.sync decode kernels, and their launch configuration (persistent CTAs per
//! multiprocessor). Pure.

use super::super::Switches;
use super::decode::{ctas_per_sm, mma_only_switch, CTAS_SWITCH};

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
/// Threads per CTA: one warpgroup (DWG_THREADS).
pub const THREADS: usize = 128;

/// `QSA_SCORES_DECODE_ENGINE`'s value, before any work.
pub fn check_engine(sw: &Switches) -> Result<(), String> {
    match sw.get(ENGINE_SWITCH) {
        None | Some("mma" | "wgmma") => Ok(()),
        Some(other) => Err(format!("{ENGINE_SWITCH}={other}: expected mma or wgmma")),
    }
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
}

impl WgDecodeConfig {
    /// Dynamic shared memory: Q (64 rows x 128) in the operand format, 4 (TF32) or 2 (BF16)
    /// bytes per element.
    pub fn shared_bytes(bf16: bool) -> usize {
        64 * 128 * if bf16 { 2 } else { 4 }
    }
}

/// The configuration from the switches: CTAs per SM (`QSA_SCORES_DECODE_CTAS_PER_SM`, else
/// `DEFAULT_CTAS_PER_SM`). The mma.sync kernels' ring depth and warps mean nothing here: a
/// call that sets them is refused, naming the switch and the fix.
pub fn config_for(sw: &Switches) -> Result<WgDecodeConfig, String> {
    if let Some(k) = mma_only_switch(sw) {
        return Err(format!(
            "{k} configures the mma.sync decode scorer, and this call runs the wgmma one; set {ENGINE_SWITCH}=mma to sweep it, or drop {k} (the wgmma one takes {CTAS_SWITCH} only)"
        ));
    }
    check_engine(sw)?;
    Ok(WgDecodeConfig {
        ctas_per_sm: ctas_per_sm(sw)?.unwrap_or(DEFAULT_CTAS_PER_SM),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(kv: &[(&str, &str)]) -> Switches {
        Switches::from_pairs(kv)
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
        assert_eq!(config_for(&sw(&[])).unwrap().ctas_per_sm, 2);
        let four = sw(&[(CTAS_SWITCH, "4")]);
        assert_eq!(config_for(&four).unwrap().ctas_per_sm, 4);
        let e = config_for(&sw(&[(CTAS_SWITCH, "5")])).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_DECODE_CTAS_PER_SM=5: expected 1 to 4"),
            "{e}"
        );
        let e = config_for(&sw(&[("QSA_SCORES_DECODE_STAGES", "3")])).unwrap_err();
        assert!(
            e.contains("QSA_SCORES_DECODE_STAGES configures the mma.sync decode scorer")
                && e.contains("QSA_SCORES_DECODE_ENGINE=mma"),
            "{e}"
        );
        assert_eq!(WgDecodeConfig::shared_bytes(false), 32_768);
        assert_eq!(WgDecodeConfig::shared_bytes(true), 16_384);
    }
}

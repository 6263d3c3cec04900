//! The decode scorers (`block_scores_{tf32,bf16}_decode`, kernels/common/scores_decode.h):
//! which calls take them, and their launch configuration (ring depth, warps per CTA,
//! persistent CTAs per multiprocessor) with the switches that sweep it on a card. Pure. The
//! wgmma decode scorers (sm_90a) that serve the same calls: `decode_wg`.

use super::super::Switches;

/// `QSA_SCORES_DECODE_STAGES`: cp.async ring depth, 2 ..= `MAX_STAGES`.
pub const STAGES_SWITCH: &str = "QSA_SCORES_DECODE_STAGES";
/// `QSA_SCORES_DECODE_WARPS`: warps per CTA, 4 or 8 (32 blocks each per tile).
pub const WARPS_SWITCH: &str = "QSA_SCORES_DECODE_WARPS";
/// `QSA_SCORES_DECODE_CTAS_PER_SM`: persistent CTAs per multiprocessor, 1 ..= 4.
pub const CTAS_SWITCH: &str = "QSA_SCORES_DECODE_CTAS_PER_SM";
/// `QSA_SCORES_DECODE_GRID`: `full` (every CTA slot of the card, the default) or `even`
/// (the fewest CTAs that keep each one's tile count, so all streamers take the same number of
/// tiles and none idles through the last round); either engine.
pub const GRID_SWITCH: &str = "QSA_SCORES_DECODE_GRID";

/// How a persistent decode grid is sized (`GRID_SWITCH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridFill {
    /// min(tiles, multiprocessors x CTAs per SM / query groups) CTAs per query group.
    Full,
    /// As `Full`, then shrunk to the fewest CTAs that give each streamer the same most tiles
    /// (4,096 tiles on 264 slots: 16 each on 256 CTAs instead of 15 or 16 on 264).
    Even,
}

/// `GRID_SWITCH`'s value (`Full` when unset).
pub fn grid_fill(sw: &Switches) -> Result<GridFill, String> {
    match sw.get(GRID_SWITCH) {
        None | Some("full") => Ok(GridFill::Full),
        Some("even") => Ok(GridFill::Even),
        Some(v) => Err(format!("{GRID_SWITCH}={v}: expected full or even")),
    }
}

/// 16-row m-tiles per CTA (DEC_MT): a query's heads are padded to whole m-tiles.
pub const M_TILES: usize = 4;
/// Q resident in shared memory: 64 rows x DEC_QLD (132) floats.
pub const Q_BYTES: usize = 16 * M_TILES * 132 * 4;
/// One block's row of a ring buffer: TC_LD (36) floats for a 32-wide k chunk.
const RING_ROW_BYTES: usize = 36 * 4;
/// DEC_MAX_STAGES: the kernel's wait takes at most `stages - 2` = 4 pending groups.
pub const MAX_STAGES: usize = 6;
/// The ring depth when no switch says otherwise (shrunk to what the target's shared memory
/// holds; measured in `config_for`).
pub const DEFAULT_STAGES: usize = 4;
/// Warps per CTA when no switch says otherwise (see `config_for`).
pub const DEFAULT_WARPS: usize = 4;
/// Most query groups (grid.y: each group's CTAs stream all of Kb) the dispatch sends to the
/// decode tile instead of the wide one: one, i.e. every row of the call in one CTA's 64 (1
/// query of 64 heads, up to 4 of 16). Measured on the H200 (2026-12-02 03:16 UTC,
/// bench/scores_vs_torch.py, 262,144 blocks): 2 x 64 decode 141.0 us against the wide
/// mma.sync tile's 115.1, 4 x 64 269.0 against 219.0 (each group redoes the MMAs on Kb:
/// the kernel is MMA-bound, not HBM-bound). `QSA_SCORES_TILE=decode` still forces more.
pub const MAX_GROUPS: usize = 1;

/// One launch configuration of the decode scorers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeConfig {
    /// Warps per CTA; a tile is 32 blocks per warp.
    pub warps: usize,
    /// cp.async ring buffers of one 32-wide k chunk of a tile each.
    pub stages: usize,
    /// Persistent CTAs per multiprocessor (grid.x = multiprocessors x this / query groups).
    pub ctas_per_sm: usize,
    /// How the persistent grid is sized.
    pub fill: GridFill,
}

impl DecodeConfig {
    pub fn threads(&self) -> usize {
        32 * self.warps
    }
    /// Blocks per tile (BN in the kernel: one per thread).
    pub fn blocks_per_tile(&self) -> usize {
        32 * self.warps
    }
    /// Dynamic shared memory: resident Q and the ring.
    pub fn shared_bytes(&self) -> usize {
        Q_BYTES + self.stages * self.blocks_per_tile() * RING_ROW_BYTES
    }
}

/// Query groups (grid.y) of a call: each CTA holds 4 / ceil(heads / 16) queries.
pub fn query_groups(nq: usize, heads: usize) -> usize {
    nq.div_ceil(M_TILES / heads.div_ceil(16).max(1))
}

/// Whether the decode tile can hold `heads` (at most 4 m-tiles = 64 heads per query).
pub fn holds_heads(heads: usize) -> bool {
    heads.div_ceil(16) <= M_TILES
}

/// Whether the dispatch takes the decode tile for `nq x heads` (1 ..= 64 heads, at most
/// `MAX_GROUPS` query groups).
pub fn takes(nq: usize, heads: usize) -> bool {
    heads >= 1 && holds_heads(heads) && query_groups(nq, heads) <= MAX_GROUPS
}

fn parse(
    sw: &Switches,
    key: &str,
    allowed: &[usize],
    expected: &str,
) -> Result<Option<usize>, String> {
    match sw.get(key) {
        None => Ok(None),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if allowed.contains(&n) => Ok(Some(n)),
            _ => Err(format!("{key}={v}: expected {expected}")),
        },
    }
}

/// What the switches force (each None when unset).
struct Forced {
    warps: Option<usize>,
    stages: Option<usize>,
    ctas_per_sm: Option<usize>,
}

fn forced(sw: &Switches) -> Result<Forced, String> {
    Ok(Forced {
        warps: parse(sw, WARPS_SWITCH, &[4, 8], "4 or 8")?,
        stages: parse(sw, STAGES_SWITCH, &[2, 3, 4, 5, 6], "2 to 6")?,
        ctas_per_sm: ctas_per_sm(sw)?,
    })
}

/// `QSA_SCORES_DECODE_CTAS_PER_SM` (either engine's), if set.
pub fn ctas_per_sm(sw: &Switches) -> Result<Option<usize>, String> {
    parse(sw, CTAS_SWITCH, &[1, 2, 3, 4], "1 to 4")
}

/// Whether a mma.sync-only switch (ring depth, warps) is set: the wgmma decode kernels
/// refuse them (`decode_wg::config_for`).
pub fn mma_only_switch(sw: &Switches) -> Option<&'static str> {
    [STAGES_SWITCH, WARPS_SWITCH]
        .into_iter()
        .find(|k| sw.get(k).is_some())
}

/// The switches' values, checked before any work.
pub fn check_switches(sw: &Switches) -> Result<(), String> {
    forced(sw)?;
    grid_fill(sw)?;
    super::decode_wg::check_switches(sw)
}

/// The configuration for a target allowing `shared_limit` bytes per block: 4 warps; 2
/// stages where 3 CTAs of them fit the block limit (sm_90: 3 x 70,656 B), else the deepest
/// ring up to `DEFAULT_STAGES` that fits (sm_86: 3); as many CTAs per multiprocessor (up to
/// 3) as the block limit holds (the limit stands in for the SM's capacity); each overridden
/// by its switch. A forced configuration the target cannot hold is an error naming bytes,
/// limit and switches. Measured on the H200 (1 x 64 x 262,144, tf32, bench/scores_vs_torch.py,
/// median us): call B (2026-12-02 ~03:47 UTC, registers-rounded Kb): 4 warps x 2 stages x 3
/// CTAs/SM 56.7; 4 x 3 x 2 59.2; 4 x 4 x 2 65.0; 8 x 4 x 1 63.6; 8 x 5 x 1 63.5. Call A
/// (03:16, the first kernel): 4 x 4 x 2 69.8; 8 x 3 / 4 / 5 x 1 73.9 / 73.5 / 71.7; 8 x 2 x 2
/// 76.2; 4 x 6 x 1 102.8; an L2::256B prefetch hint on the copies 74.7 against 73.5 (removed).
pub fn config_for(sw: &Switches, shared_limit: u32) -> Result<DecodeConfig, String> {
    let Forced {
        warps,
        stages,
        ctas_per_sm: ctas,
    } = forced(sw)?;
    if let Some(k) = super::decode_wg::wgmma_only_switch(sw) {
        return Err(format!(
            "{k} configures the wgmma decode scorer (sm_90a), and this call runs the mma.sync one; drop {k}, or set {} where the wgmma one is built",
            super::decode_wg::ENGINE_SWITCH
        ));
    }
    let fill = grid_fill(sw)?;
    let limit = shared_limit as usize;
    let fits = |c: &DecodeConfig| c.shared_bytes() <= limit;
    let with = |warps, stages| DecodeConfig {
        warps,
        stages,
        ctas_per_sm: 1,
        fill,
    };
    let warps = warps.unwrap_or(DEFAULT_WARPS);
    let stages = stages.unwrap_or_else(|| {
        if 3 * with(warps, 2).shared_bytes() <= limit {
            return 2;
        }
        (2..=DEFAULT_STAGES)
            .rev()
            .find(|&s| fits(&with(warps, s)))
            .unwrap_or(2)
    });
    let mut c = with(warps, stages);
    c.ctas_per_sm = ctas.unwrap_or_else(|| (limit / c.shared_bytes()).clamp(1, 3));
    if !fits(&c) {
        return Err(format!(
            "decode scorer with {warps} warps and {stages} stages needs {} B of shared memory per block, the target allows {limit}; lower {STAGES_SWITCH} or {WARPS_SWITCH}",
            c.shared_bytes()
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(kv: &[(&str, &str)]) -> Switches {
        Switches::from_pairs(kv)
    }

    #[test]
    fn defaults_fit_each_target() {
        // sm_90 (227 KiB): 4 warps x 2 stages = 33,792 + 2 x 18,432, three per SM.
        let c = config_for(&sw(&[]), 232_448).unwrap();
        assert_eq!((c.warps, c.stages, c.ctas_per_sm), (4, 2, 3));
        assert_eq!(c.shared_bytes(), 70_656);
        // 3 stages: two per SM.
        let c = config_for(&sw(&[(STAGES_SWITCH, "3")]), 232_448).unwrap();
        assert_eq!((c.ctas_per_sm, c.shared_bytes()), (2, 89_088));
        // 8 warps: 4 stages, one CTA per SM.
        let c = config_for(&sw(&[(WARPS_SWITCH, "8")]), 232_448).unwrap();
        assert_eq!((c.stages, c.ctas_per_sm, c.shared_bytes()), (4, 1, 181_248));
        // sm_86 (99 KiB): 4 warps, 3 stages = 33,792 + 3 x 18,432.
        let c = config_for(&sw(&[]), 101_376).unwrap();
        assert_eq!((c.warps, c.stages, c.ctas_per_sm), (4, 3, 1));
        assert_eq!(c.shared_bytes(), 89_088);
        // The kernel's declared launch shape (block 128, 89,088 B) is sm_86's default.
        assert_eq!(c.threads(), 128);
    }

    #[test]
    fn switches_force_the_config_and_bad_values_are_refused() {
        let c = config_for(
            &sw(&[
                (STAGES_SWITCH, "6"),
                (WARPS_SWITCH, "4"),
                (CTAS_SWITCH, "2"),
            ]),
            232_448,
        )
        .unwrap();
        assert_eq!((c.warps, c.stages, c.ctas_per_sm), (4, 6, 2));
        let e = config_for(&sw(&[(STAGES_SWITCH, "6"), (WARPS_SWITCH, "8")]), 101_376).unwrap_err();
        assert!(
            e.contains("8 warps and 6 stages needs 254976 B") && e.contains("allows 101376"),
            "{e}"
        );
        for (k, v, want) in [
            (STAGES_SWITCH, "7", "expected 2 to 6"),
            (STAGES_SWITCH, "1", "expected 2 to 6"),
            (WARPS_SWITCH, "6", "expected 4 or 8"),
            (CTAS_SWITCH, "0", "expected 1 to 4"),
            (CTAS_SWITCH, "two", "expected 1 to 4"),
        ] {
            let e = check_switches(&sw(&[(k, v)])).unwrap_err();
            assert!(e.contains(&format!("{k}={v}: {want}")), "{e}");
        }
    }

    /// The wgmma decode scorer's switches mean nothing to the mma.sync one: refused by name.
    #[test]
    fn mma_decode_refuses_the_wgmma_switches() {
        for k in ["QSA_SCORES_DECODE_WG_RING", "QSA_SCORES_DECODE_WG_GROUPS"] {
            let e = config_for(&sw(&[(k, "2")]), 232_448).unwrap_err();
            assert!(
                e.contains(&format!("{k} configures the wgmma decode scorer (sm_90a)")),
                "{e}"
            );
        }
        let c = config_for(&sw(&[(GRID_SWITCH, "even")]), 232_448).unwrap();
        assert_eq!(c.fill, GridFill::Even);
    }

    #[test]
    fn decode_takes_calls_whose_rows_fit_one_cta() {
        assert_eq!(query_groups(1, 64), 1);
        assert_eq!(query_groups(2, 64), 2);
        assert_eq!(query_groups(9, 7), 3); // 4 queries of one m-tile per CTA
        assert_eq!(query_groups(5, 48), 5); // 3 m-tiles: one query per CTA
        assert!(takes(1, 64) && takes(4, 16) && takes(2, 20) && takes(1, 40));
        assert!(!takes(2, 64) && !takes(5, 16) && !takes(9, 7) && !takes(1, 65) && !takes(1, 0));
    }
}

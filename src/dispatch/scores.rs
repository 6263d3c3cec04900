//! Block-score dispatch: tensor cores where the target has them, the FP32 tiled SIMT kernel
//! below sm_80 and where tensor cores are switched off, the warp kernel when forced; and,
//! for the tensor-core kernels, which CTA tile fits the shape. On AMD the matrix-core kernels
//! run only when opted in (STRATA_BF16_TC=1): no runner has measured that they pay, so the
//! default there stays SIMT / warp.

use super::{Feature, Switches, TargetCaps, Vendor};

pub mod decode;
pub mod decode_wg;
mod engine;
pub use engine::{
    auto_units_per_cta, check_wg_kernel, check_wg_upc, tc_engine, wg_kernel, wgmma_built,
    wgmma_units_per_cta, TcEngine, WgKernel, FORCE_MMA_SYNC, WG_KERNELS, WG_KERNEL_DEFAULT,
    WG_KERNEL_SWITCH, WG_UPC_DEFAULT, WG_UPC_SWITCH,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoresKernel {
    /// One warp per dot product, shuffle reduction: the baseline.
    Warp,
    /// FP32 tiled SIMT GEMM: each thread 1 query x 8 heads x 8 blocks, Q and Kb staged in
    /// shared memory 8 (or 16, `SimtChunk`) d at a time.
    Simt,
    /// TF32 tensor cores (NVIDIA sm_80+).
    Tf32,
    /// BF16 tensor cores, opt-in (STRATA_BF16_TC=1).
    Bf16,
    /// BF16 AMD matrix cores, opt-in (STRATA_BF16_TC=1): WMMA on RDNA4, MFMA on gfx950.
    AmdMatrixBf16(AmdMatrix),
}

/// The AMD matrix instruction a target's `block_scores_{wmma,mfma}_bf16` kernel is built
/// with. The kernels are compiled only for the archs `amd_matrix` names (the `#if` in
/// kernels/block_scores.cu): both lists must change together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmdMatrix {
    /// v_wmma_f32_16x16x16_bf16, wave32: gfx1200 / gfx1201.
    Wmma,
    /// v_mfma_f32_16x16x32_bf16, wave64: gfx950.
    Mfma,
}

/// The matrix-core kernel `caps` has, if any. The feature alone is not enough: Feature::Wmma
/// also covers gfx11 (another WMMA layout) and Feature::Mfma gfx908..gfx942 (no
/// 16x16x32 bf16), for which no kernel is built.
pub fn amd_matrix(caps: &TargetCaps) -> Option<AmdMatrix> {
    if caps.vendor != Vendor::Amd {
        return None;
    }
    let name = caps.name.as_str();
    if caps.has(Feature::Wmma) && matches!(name, "gfx1200" | "gfx1201") {
        Some(AmdMatrix::Wmma)
    } else if caps.has(Feature::Mfma) && name == "gfx950" {
        Some(AmdMatrix::Mfma)
    } else {
        None
    }
}

impl ScoresKernel {
    pub fn name(self) -> &'static str {
        match self {
            ScoresKernel::Warp => "warp",
            ScoresKernel::Simt => "simt",
            ScoresKernel::Tf32 => "tf32",
            ScoresKernel::Bf16 => "bf16",
            ScoresKernel::AmdMatrixBf16(AmdMatrix::Wmma) => "wmma_bf16",
            ScoresKernel::AmdMatrixBf16(AmdMatrix::Mfma) => "mfma_bf16",
        }
    }
    /// Whether the kernel is one of NVIDIA's tensor-core kernels (exists only in sm_80+ code
    /// objects, and has the `TcTile` tiles). The AMD matrix-core kernels are not.
    pub fn tensor_cores(self) -> bool {
        matches!(self, ScoresKernel::Tf32 | ScoresKernel::Bf16)
    }
}

/// qsa's forcing switches for the scorers (for benches and tests; the engine never sets
/// them): `QSA_SCORES_KERNEL` names a kernel (`tf32_mma` / `bf16_mma`: the TF32 / BF16
/// kernel on mma.sync where wgmma would run, `engine.rs`), `QSA_SCORES_TILE` a tensor-core
/// CTA tile.
pub const KERNEL_SWITCH: &str = "QSA_SCORES_KERNEL";
pub const TILE_SWITCH: &str = "QSA_SCORES_TILE";
/// `QSA_SCORES_SIMT_DC` forces the SIMT kernel's d-chunk (`SimtChunk`), to sweep it on a card.
pub const SIMT_CHUNK_SWITCH: &str = "QSA_SCORES_SIMT_DC";

/// The forcing switches' values, checked before any work: an unknown value is an error that
/// lists the known ones.
pub fn check_switches(sw: &Switches) -> Result<(), String> {
    match sw.get(KERNEL_SWITCH) {
        None | Some("warp" | "simt" | "tf32" | "bf16" | "tf32_mma" | "bf16_mma") => {}
        Some(other) => {
            return Err(format!(
                "{KERNEL_SWITCH}={other}: expected warp, simt, tf32, bf16, tf32_mma or bf16_mma (the last two: mma.sync where wgmma would run)"
            ))
        }
    }
    match sw.get(TILE_SWITCH) {
        None | Some("wide" | "decode") => {}
        Some(other) => return Err(format!("{TILE_SWITCH}={other}: expected wide or decode")),
    }
    check_wg_upc(sw)?;
    check_wg_kernel(sw)?;
    match sw.get(SIMT_CHUNK_SWITCH) {
        None | Some("8" | "16") => {}
        Some(other) => return Err(format!("{SIMT_CHUNK_SWITCH}={other}: expected 8 or 16")),
    }
    decode::check_switches(sw)
}

/// The kernel `QSA_SCORES_KERNEL` forces, where the target has it (a forced kernel the target
/// lacks falls back to the engine's choice, as a forced top-k kernel does).
fn forced(caps: &TargetCaps, sw: &Switches) -> Option<ScoresKernel> {
    let nvidia = caps.vendor == Vendor::Nvidia;
    match sw.get(KERNEL_SWITCH)? {
        "warp" => Some(ScoresKernel::Warp),
        "simt" => Some(ScoresKernel::Simt),
        "tf32" | "tf32_mma" if nvidia && caps.has(Feature::Tf32Tc) => Some(ScoresKernel::Tf32),
        "bf16" | "bf16_mma" if nvidia && caps.has(Feature::Bf16Tc) => Some(ScoresKernel::Bf16),
        "bf16" => amd_matrix(caps).map(ScoresKernel::AmdMatrixBf16),
        _ => None,
    }
}

pub fn choose(caps: &TargetCaps, sw: &Switches) -> ScoresKernel {
    if let Some(k) = forced(caps, sw) {
        return k;
    }
    let simt_off = sw.off("STRATA_SELECT_SIMT") || sw.on("STRATA_SELECT_OLD");
    let tc_off = sw.on("STRATA_QSA_WARP") || sw.on("STRATA_SELECT_OLD");
    let nvidia_tc = caps.vendor == Vendor::Nvidia && caps.has(Feature::Tf32Tc);
    if !tc_off && nvidia_tc {
        if sw.on("STRATA_BF16_TC") && caps.has(Feature::Bf16Tc) {
            return ScoresKernel::Bf16;
        }
        return ScoresKernel::Tf32;
    }
    if !tc_off && sw.on("STRATA_BF16_TC") {
        if let Some(m) = amd_matrix(caps) {
            return ScoresKernel::AmdMatrixBf16(m);
        }
    }
    if simt_off {
        ScoresKernel::Warp
    } else {
        ScoresKernel::Simt
    }
}

/// Fewest queries for which the FP32 tiled SIMT kernel pays: its CTA tile holds 16 queries
/// (32 before 2026-12-02), so a decode call (1 query) wastes 15/16 of it. Measured on the H200
/// with the 32-query tile (2026-11-30, bench/scores_vs_torch.py): 1 query x 64 heads x 262,144
/// blocks, SIMT 3,656 us against 682 us for the warp kernel; not re-measured for the 16-query
/// tile (the bench's `simt:QSA_SCORES_KERNEL=simt` row at 1 x 64 x 262,144 does).
pub const SIMT_MIN_QUERIES: usize = 8;

/// `choose` for a call with `nq` queries: where the tensor-core kernels are off or absent,
/// decode-sized calls take the warp kernel instead of the SIMT kernel (unless
/// `QSA_SCORES_KERNEL=simt` forces it, e.g. to measure it at 1 query).
pub fn choose_for(caps: &TargetCaps, sw: &Switches, nq: usize) -> ScoresKernel {
    match choose(caps, sw) {
        ScoresKernel::Simt if nq < SIMT_MIN_QUERIES && forced(caps, sw).is_none() => {
            ScoresKernel::Warp
        }
        k => k,
    }
}

/// How many d the SIMT kernel stages per barrier (SIMT_DC in kernels/common/scores_simt.h,
/// `simt_body`): one kernel each, the same tile, grid and summation order (so the same
/// results bit for bit). 8 is the default and the only one built below sm_90
/// (`simt_d16_built`); which is faster on the H200 is not measured yet:
/// `QSA_SCORES_SIMT_DC=16` runs the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimtChunk {
    D8,
    D16,
}

impl SimtChunk {
    /// The kernel's `extern "C"` name.
    pub fn kernel(self) -> &'static str {
        match self {
            SimtChunk::D8 => "block_scores_simt",
            SimtChunk::D16 => "block_scores_simt_d16",
        }
    }
}

/// Whether `caps`'s code object has `block_scores_simt_d16`: NVIDIA sm_90+ (Feature::Clusters
/// marks exactly those), the `#if` around the kernel in kernels/block_scores.cu; both must
/// change together. Elsewhere it spills at 128 registers.
pub fn simt_d16_built(caps: &TargetCaps) -> bool {
    caps.vendor == Vendor::Nvidia && caps.has(Feature::Clusters)
}

/// The SIMT d-chunk: D8 unless `QSA_SCORES_SIMT_DC=16` (values checked by `check_switches`).
pub fn simt_chunk_for(sw: &Switches) -> SimtChunk {
    match sw.get(SIMT_CHUNK_SWITCH) {
        Some("16") => SimtChunk::D16,
        _ => SimtChunk::D8,
    }
}

/// CTA tile of the tensor-core kernels (kernels/common/scores_tc.h, `tc_body`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcTile {
    /// 128 rows (8 m-tiles of 16 heads) x 128 blocks: prefill.
    Wide,
    /// The streaming decode kernels (`decode`; on sm_90a optionally their wgmma twins,
    /// `decode_wg`): 64 rows (4 m-tiles) resident per CTA, Kb streamed once per query group
    /// by persistent CTAs; heads <= 64, few query groups.
    Decode,
}

impl TcTile {
    /// 16-row m-tiles per CTA.
    pub fn m_tiles(self) -> usize {
        match self {
            TcTile::Wide => 8,
            TcTile::Decode => 4,
        }
    }
    /// Blocks per CTA tile of the wide kernels (the decode kernels' tile is
    /// `decode::DecodeConfig::blocks_per_tile`).
    pub fn blocks(self) -> usize {
        match self {
            TcTile::Wide => 128,
            TcTile::Decode => 256,
        }
    }
}

/// `tc_tile`, unless `QSA_SCORES_TILE` forces one (values checked by `check_switches`).
pub fn tc_tile_for(sw: &Switches, nq: usize, heads: usize) -> TcTile {
    match sw.get(TILE_SWITCH) {
        Some("wide") => TcTile::Wide,
        Some("decode") => TcTile::Decode,
        _ => tc_tile(nq, heads),
    }
}

/// `tc_tile_for` for `kernel` on `caps`: where the decode tile runs on wgmma (sm_90a,
/// `tc_engine`), a TF32 call takes it for up to `decode_wg::MAX_GROUPS_TF32` query groups
/// (measured faster than the wide tile there: 2 x 64 x 262,144); otherwise as `tc_tile_for`. What the runner,
/// `qsa plan` and the dispatch table use.
pub fn tc_tile_on(
    caps: &TargetCaps,
    sw: &Switches,
    kernel: ScoresKernel,
    nq: usize,
    heads: usize,
) -> TcTile {
    let wg_decode = sw.get(TILE_SWITCH).is_none()
        && kernel == ScoresKernel::Tf32
        && tc_engine(caps, sw, TcTile::Decode) == TcEngine::Wgmma
        && heads >= 1
        && decode::holds_heads(heads)
        && decode::query_groups(nq, heads) <= decode_wg::MAX_GROUPS_TF32;
    if wg_decode {
        TcTile::Decode
    } else {
        tc_tile_for(sw, nq, heads)
    }
}

/// Each query's heads are padded to whole 16-row m-tiles; the decode tile is taken for at
/// most 64 heads when the queries fill at most `decode::MAX_GROUPS` decode CTAs' 4 m-tiles
/// (one: 1 query of 64 heads, up to 4 of 16).
pub fn tc_tile(nq: usize, heads: usize) -> TcTile {
    if decode::takes(nq, heads) {
        TcTile::Decode
    } else {
        TcTile::Wide
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(vendor: Vendor, features: Vec<Feature>) -> TargetCaps {
        TargetCaps {
            name: "t".into(),
            vendor,
            wave: 32,
            shared_per_block: 65536,
            multiprocessors: 1,
            features,
        }
    }

    fn sw(kv: &[(&str, &str)]) -> Switches {
        Switches::from_pairs(kv)
    }

    #[test]
    fn tensor_cores_only_where_the_target_has_them() {
        let sm75 = caps(Vendor::Nvidia, vec![]);
        let sm90 = caps(Vendor::Nvidia, vec![Feature::Tf32Tc, Feature::Bf16Tc]);
        let gfx950 = caps(Vendor::Amd, vec![Feature::Mfma]);
        assert_eq!(choose(&sm75, &sw(&[])), ScoresKernel::Simt);
        assert_eq!(choose_for(&sm75, &sw(&[]), 1), ScoresKernel::Warp);
        assert_eq!(
            choose_for(&sm75, &sw(&[]), SIMT_MIN_QUERIES),
            ScoresKernel::Simt
        );
        assert_eq!(choose_for(&sm90, &sw(&[]), 1), ScoresKernel::Tf32);
        assert_eq!(
            choose(&sm75, &sw(&[("STRATA_BF16_TC", "1")])),
            ScoresKernel::Simt
        );
        assert_eq!(
            choose(&gfx950, &sw(&[("STRATA_BF16_TC", "1")])),
            ScoresKernel::Simt
        );
        assert_eq!(choose(&sm90, &sw(&[])), ScoresKernel::Tf32);
        assert_eq!(
            choose(&sm90, &sw(&[("STRATA_BF16_TC", "1")])),
            ScoresKernel::Bf16
        );
        assert_eq!(
            choose(&sm90, &sw(&[("STRATA_QSA_WARP", "1")])),
            ScoresKernel::Simt
        );
        let warp = sw(&[("STRATA_QSA_WARP", "1"), ("STRATA_SELECT_SIMT", "0")]);
        assert_eq!(choose(&sm90, &warp), ScoresKernel::Warp);
        assert_eq!(
            choose(&sm90, &sw(&[("STRATA_SELECT_OLD", "1")])),
            ScoresKernel::Warp
        );
    }

    fn named(name: &str, vendor: Vendor, features: Vec<Feature>) -> TargetCaps {
        TargetCaps {
            name: name.into(),
            ..caps(vendor, features)
        }
    }

    #[test]
    fn amd_matrix_cores_only_when_opted_in_on_their_targets() {
        let bf16 = sw(&[("STRATA_BF16_TC", "1")]);
        let gfx1201 = named("gfx1201", Vendor::Amd, vec![Feature::Wmma]);
        let gfx1200 = named("gfx1200", Vendor::Amd, vec![Feature::Wmma]);
        let gfx950 = named("gfx950", Vendor::Amd, vec![Feature::Mfma]);
        let wmma = ScoresKernel::AmdMatrixBf16(AmdMatrix::Wmma);
        let mfma = ScoresKernel::AmdMatrixBf16(AmdMatrix::Mfma);
        assert_eq!(choose(&gfx1201, &bf16), wmma);
        assert_eq!(choose(&gfx1200, &bf16), wmma);
        assert_eq!(choose(&gfx950, &bf16), mfma);
        assert_eq!(wmma.name(), "wmma_bf16");
        assert_eq!(mfma.name(), "mfma_bf16");
        assert!(!wmma.tensor_cores() && !mfma.tensor_cores());
        // Decode-sized calls keep the opted-in kernel (only SIMT gives way to warp).
        assert_eq!(choose_for(&gfx950, &bf16, 1), mfma);
        // Never by default: SIMT / warp as before.
        for t in [&gfx1201, &gfx950] {
            assert_eq!(choose(t, &sw(&[])), ScoresKernel::Simt);
            assert_eq!(choose_for(t, &sw(&[]), 1), ScoresKernel::Warp);
            assert_eq!(
                choose(t, &sw(&[("STRATA_BF16_TC", "0")])),
                ScoresKernel::Simt
            );
        }
        // The switches that turn tensor cores off turn matrix cores off too.
        let warp_too = sw(&[("STRATA_BF16_TC", "1"), ("STRATA_QSA_WARP", "1")]);
        assert_eq!(choose(&gfx950, &warp_too), ScoresKernel::Simt);
        let old = sw(&[("STRATA_BF16_TC", "1"), ("STRATA_SELECT_OLD", "1")]);
        assert_eq!(choose(&gfx1201, &old), ScoresKernel::Warp);
        // The feature without a built kernel: gfx11 WMMA, pre-gfx950 MFMA, gfx906, NVIDIA.
        let gfx1100 = named("gfx1100", Vendor::Amd, vec![Feature::Wmma]);
        let gfx942 = named("gfx942", Vendor::Amd, vec![Feature::Mfma]);
        let gfx906 = named("gfx906", Vendor::Amd, vec![]);
        let nv = named("gfx950", Vendor::Nvidia, vec![Feature::Mfma]);
        for t in [&gfx1100, &gfx942, &gfx906, &nv] {
            assert_eq!(amd_matrix(t), None, "{}", t.name);
            assert_eq!(choose(t, &bf16), ScoresKernel::Simt, "{}", t.name);
        }
        // A feature list that does not match the arch gets nothing either.
        assert_eq!(
            amd_matrix(&named("gfx950", Vendor::Amd, vec![Feature::Wmma])),
            None
        );
    }

    #[test]
    fn decode_tile_only_when_all_rows_fit_one_cta() {
        assert_eq!(tc_tile(1, 64), TcTile::Decode);
        assert_eq!(tc_tile(2, 64), TcTile::Wide);
        assert_eq!(tc_tile(4, 16), TcTile::Decode);
        assert_eq!(tc_tile(9, 7), TcTile::Wide);
        assert_eq!(tc_tile(1, 65), TcTile::Wide);
        assert_eq!(tc_tile(256, 64), TcTile::Wide);
    }

    #[test]
    fn forcing_switches_pick_the_kernel_and_tile_and_refuse_unknown_values() {
        let hopper = caps(Vendor::Nvidia, vec![Feature::Tf32Tc, Feature::Bf16Tc]);
        let turing = caps(Vendor::Nvidia, vec![]);
        // The SIMT kernel at 1 query, which the engine's dispatch never takes.
        let simt = sw(&[(KERNEL_SWITCH, "simt")]);
        assert_eq!(choose_for(&hopper, &simt, 1), ScoresKernel::Simt);
        assert_eq!(choose_for(&turing, &sw(&[]), 1), ScoresKernel::Warp);
        // A tensor-core kernel the target lacks falls back to the engine's choice.
        assert_eq!(
            choose_for(&turing, &sw(&[(KERNEL_SWITCH, "tf32")]), 64),
            ScoresKernel::Simt
        );
        assert_eq!(
            choose_for(&hopper, &sw(&[(KERNEL_SWITCH, "bf16")]), 64),
            ScoresKernel::Bf16
        );
        // The tile: forced either way, else by shape.
        assert_eq!(tc_tile_for(&sw(&[]), 1, 64), TcTile::Decode);
        assert_eq!(
            tc_tile_for(&sw(&[(TILE_SWITCH, "wide")]), 1, 64),
            TcTile::Wide
        );
        assert_eq!(
            tc_tile_for(&sw(&[(TILE_SWITCH, "decode")]), 256, 64),
            TcTile::Decode
        );
        // sm_90a: TF32 takes the wgmma decode kernel for up to 2 query groups; BF16, forced
        // mma.sync and targets without wgmma keep one.
        let sm90a = caps(
            Vendor::Nvidia,
            vec![Feature::Tf32Tc, Feature::Bf16Tc, Feature::Wgmma],
        );
        let tf32 = ScoresKernel::Tf32;
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), tf32, 2, 64), TcTile::Decode);
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), tf32, 3, 64), TcTile::Wide);
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), tf32, 8, 16), TcTile::Decode);
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), tf32, 9, 16), TcTile::Wide);
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), tf32, 2, 65), TcTile::Wide);
        let bf16 = ScoresKernel::Bf16;
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), bf16, 2, 64), TcTile::Wide);
        assert_eq!(tc_tile_on(&sm90a, &sw(&[]), bf16, 1, 64), TcTile::Decode);
        let mma = sw(&[(decode_wg::ENGINE_SWITCH, "mma")]);
        assert_eq!(tc_tile_on(&sm90a, &mma, tf32, 2, 64), TcTile::Wide);
        assert_eq!(tc_tile_on(&hopper, &sw(&[]), tf32, 2, 64), TcTile::Wide);
        let wide = sw(&[(TILE_SWITCH, "wide")]);
        assert_eq!(tc_tile_on(&sm90a, &wide, tf32, 1, 64), TcTile::Wide);
        assert!(check_switches(&simt).is_ok());
        let e = check_switches(&sw(&[(KERNEL_SWITCH, "fast")])).unwrap_err();
        assert!(
            e.contains("expected warp, simt, tf32, bf16, tf32_mma or bf16_mma"),
            "{e}"
        );
        let e = check_switches(&sw(&[(TILE_SWITCH, "tall")])).unwrap_err();
        assert!(e.contains("expected wide or decode"), "{e}");
        // The SIMT d-chunk: 8 unless forced to 16; anything else refused.
        assert_eq!(simt_chunk_for(&sw(&[])), SimtChunk::D8);
        let d16 = sw(&[(SIMT_CHUNK_SWITCH, "16")]);
        assert_eq!(simt_chunk_for(&d16), SimtChunk::D16);
        assert_eq!(SimtChunk::D16.kernel(), "block_scores_simt_d16");
        assert!(simt_d16_built(&caps(
            Vendor::Nvidia,
            vec![Feature::Tf32Tc, Feature::Clusters]
        )));
        assert!(!simt_d16_built(&turing));
        assert!(!simt_d16_built(&caps(Vendor::Amd, vec![Feature::Clusters])));
        assert!(check_switches(&d16).is_ok());
        let e = check_switches(&sw(&[(SIMT_CHUNK_SWITCH, "32")])).unwrap_err();
        assert!(e.contains("QSA_SCORES_SIMT_DC=32: expected 8 or 16"), "{e}");
    }
}

//! Selection-attention decode dispatch: when the forward takes `qsa_attn_dec_fwd_*`
//! (kernels/common/attention_decode.h) instead of the staged kernel, and its launch plan
//! (warps per CTA, cp.async ring depth, splits per work item, how the splits merge). Pure, so
//! the dispatch snapshot, the runner and bench/attention_vs_torch.py (through `qsa plan`)
//! agree on every target.

use super::{Feature, Switches, TargetCaps, Vendor};
use crate::backend::BackendError;

/// Query-head rows of one work item (DEC_ROWS): one mma M tile.
pub const DEC_ROWS: usize = 16;
/// Bytes of one ring stage: K and V sub-tiles of 16 keys x 136 u16 (DEC_STAGE_BYTES).
pub const DEC_STAGE_BYTES: usize = 2 * 16 * 136 * 2;
/// Deepest ring the kernel waits on (DEC_MAX_STAGES).
pub const DEC_MAX_STAGES: usize = 4;
/// Keys per unit (DEC_KEYS) and units per 64-key block.
const UNITS_PER_BLOCK: usize = 4;
/// Splits the in-kernel merge takes (DEC_MAX_MERGE_SPLITS); more merge by a second launch.
pub const DEC_MAX_MERGE_SPLITS: usize = 128;
/// One id per lane: lists longer than a warp take the staged kernel.
pub const DEC_MAX_T: usize = 32;
/// Warps per CTA and ring stages by default. H200, 2026-12-02 06:12 UTC (this kernel: 16 q x 8
/// KV heads, group 16, 262K): 8 x 2 22.8 us, 4 x 3 22.4, 4 x 2 22.9, 8 x 3 23.2, 2 x 2 35.7;
/// 12 warps per SM (4 warps x 3 splits) 28.5; the K/V copies alone (probe no_math) 21.2 us, so
/// this shape is at its traffic's floor and the warp count no longer matters from 4 up.
/// Session 6's kernel, H200, 2026-12-02 03:20 UTC
/// (`bench/attention_vs_torch.py --bench --decode-only`, /work/wt/results/attndec-1.md), 16
/// queries x 8 KV heads at 262K, group 16: 4 warps 34.8-35.1 us whatever the stages (2-4), 8
/// warps x 2 stages 27.1 us, 8 x 3 29.5 us; one query: 8 x 2 (8 splits) 15.1 us against 17.6
/// at 4 warps. One warp per scheduler leaves each unit's dependent mma / shuffle chain exposed.
const DEFAULT_WARPS: usize = 8;
const DEFAULT_MAX_STAGES: usize = 2;
/// The decode kernel takes shapes of at most this many work items per multiprocessor; beyond,
/// the staged (sm_90: ring) forward wins. H200, 2026-12-02 06:12 UTC (/work/wt/results/
/// attndec-1.md, `bench/attention_vs_torch.py --bench --decode-only`, group 16, 8 KV heads,
/// 262K, both forced): 1.9 items / SM decode 43.9 us vs 81.1 (1.85x), 3.9: 83.7 vs 117.5
/// (1.41x), 7.8: 161.7 vs 158.7 (0.98x), 15.5: 318.4 vs 300.2 (0.94x). The ratio falls through
/// 1.0 near 7.5 items per SM (linear between the measured 3.9 and 7.8); 6 keeps a margin (an
/// interpolated ~1.2x there, not measured).
const MAX_ITEMS_PER_SM: usize = 6;
/// Bytes of the `_qs_` kernels' q tile (DEC_Q_BYTES: 16 rows x 136 u16), past the ring and the
/// cluster merge's CTA result.
pub const DEC_Q_BYTES: usize = DEC_ROWS * 136 * 2;
/// Whether q is staged once per CTA in shared memory (`QSA_ATTN_DEC_QLOAD=cta`, the `_qs_`
/// kernels) when the switch is unset, by merge: the rule set before the runs
/// (docs/results/session11-2026-12-02/plans/dechead.md) flips a shape when `qload=cta` is
/// at least 0.5 us faster than auto at 16 q for groups 16 and 8, or 0.3 us at 1 q for both
/// groups. H200, `bench/attention_vs_torch.py --bench --decode-only --decode-sweep qs`,
/// medians in us, auto / qload=cta, runs on 2026-12-02 (session 11 calls A, P) and 2026-12-03 (session 12
/// call Q, docs/results/session12-2026-12-03/q/bench.md):
/// - one query (the cluster merge): g16 7.0 / 6.8, 7.1 / 6.8, 7.2 / 6.9; g8 6.9 / 6.6,
///   6.9 / 6.5, 7.0 / 6.6: the 1 q half met in the last two of three runs: staged.
/// - 16 queries (one CTA per item): g16 22.7 / 22.3, 22.3 / 22.3, 22.6 / 22.3; g8 22.0 / 21.8,
///   22.5 / 21.7, 21.8 / 22.1: never 0.5 us faster at both groups: each warp's loads stay.
const DEFAULT_Q_CTA_CLUSTER: bool = true;
const DEFAULT_Q_CTA_PER_ITEM: bool = false;

/// How the partials of a split work item are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecMerge {
    /// The item's last CTA to finish merges in the kernel (one launch; a ticket per item).
    Kernel,
    /// A second launch, qsa_attn_combine.
    Launch,
    /// sm_90: the item's DEC_CLUSTER splits are one thread-block cluster and merge through
    /// distributed shared memory (`qsa_attn_dec_cl_fwd_*`, grid items x DEC_CLUSTER).
    Cluster,
    /// The cluster kernel with the push merge (DEC_OPT_PUSH): each CTA stores its rows into
    /// the merging ranks' inboxes before the one cluster barrier, so no remote-load round trip
    /// and no second barrier (`QSA_ATTN_DEC_MERGE=push`; H200, session 13: 6.8-6.9 us against auto's 6.5-7.0 at one
    /// query, not steadily faster).
    Push,
    /// The one-level cluster merge (`qsa_attn_dec_flat_cl_fwd_*`, `QSA_ATTN_DEC_MERGE=flat`):
    /// every warp's partial over its own ring, one cluster barrier, then each rank merges its
    /// rows over all the cluster's warps through distributed shared memory (no CTA merge, no
    /// CTA barrier; H200, session 10: 9.5 / 7.9 us against auto's 7.2 / 7.0 at one query).
    Flat,
    /// The lean two-level merge (`qsa_attn_dec_lean_cl_fwd_*`, `QSA_ATTN_DEC_MERGE=lean`):
    /// each warp's partial over its own ring (no CTA barrier before it), one CTA barrier, each
    /// thread's four dims of a row weighted in registers and pushed to the row's merging rank,
    /// one cluster barrier, local reads: one CTA and one cluster barrier after the loop where
    /// the pull merge takes three and two (H200, session 13: 7.5 / 7.0 us against auto's 7.0 / 6.5-6.7
    /// at one query, g16 / g8).
    Lean,
}

impl DecMerge {
    /// Whether the item's splits are one thread-block cluster (the `_cl_` kernel).
    pub fn clustered(self) -> bool {
        matches!(
            self,
            DecMerge::Cluster | DecMerge::Push | DecMerge::Flat | DecMerge::Lean
        )
    }
}

/// What a probe launch leaves out (the kernel's DEC_PROBE_*): timed next to the full kernel, the
/// differences split its time into launch, K/V traffic and math (bench/attention_vs_torch.py's
/// `probe=` rows). The output of a probe is not the attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecProbe {
    /// Every CTA returns at once: the floor of a launch of the same grid, block, shared bytes
    /// and cluster shape.
    Launch,
    /// No K/V copies: q, the id list, the math on whatever the ring holds, the merges.
    NoKv,
    /// The K/V copies without the math (o = 0, lse = -inf).
    NoMath,
    /// Return once q and the unit list are in registers: the head of the dependent chain
    /// (launch, the ids' and q's loads, the list).
    List,
    /// Return after the per-warp loop: everything but the CTA and cluster merges.
    Loop,
    /// Return after the merge's CTA level (the CTA's result in its own shared memory, nothing
    /// remote): `loop` to `cta` is the CTA merge. The push kernel runs the pull merge's CTA
    /// level here; the flat merge stops after its warps' stores.
    Cta,
    /// The CTA level and one cluster barrier (the push and lean merges' remote stores
    /// included), no cluster-level reads or output stores: `cta` to `cluster` is the barrier.
    Cluster,
}

impl DecProbe {
    /// The kernel's DEC_PROBE_* value.
    fn code(self) -> i32 {
        match self {
            DecProbe::Launch => 1,
            DecProbe::NoKv => 2,
            DecProbe::NoMath => 3,
            DecProbe::List => 4,
            DecProbe::Loop => 5,
            DecProbe::Cta => 6,
            DecProbe::Cluster => 7,
        }
    }
}

/// opts bit 3 (DEC_OPT_L2_256): the K/V copies' 256-byte L2 prefetch.
const OPT_L2_256: i32 = 8;
/// opts bit 4 (DEC_OPT_PUSH): the cluster kernel's push merge.
const OPT_PUSH: i32 = 16;
/// opts bit 5 (DEC_OPT_INTERLEAVE): a warp takes every warps-th unit of its split.
const OPT_INTERLEAVE: i32 = 32;
/// opts bits 6-8 (DEC_OPT_AHEAD_SHIFT): units of L2 look-ahead.
const OPT_AHEAD_SHIFT: i32 = 6;
/// The largest look-ahead the three bits hold.
const MAX_AHEAD: usize = 7;
/// opts bit 9 (DEC_OPT_HND): K / V head-major (token stride D, head stride kv_len x D).
pub const OPT_HND: i32 = 512;

impl DecodePlan {
    /// The kernel's `opts` argument: the probe (DEC_PROBE_MASK, 0 for the attention), the L2
    /// prefetch, push-merge, interleave, look-ahead and head-major bits.
    pub fn opts(&self) -> i32 {
        let mut opts = self.probe.map_or(0, DecProbe::code);
        if self.l2_256 {
            opts |= OPT_L2_256;
        }
        if self.merge == DecMerge::Push {
            opts |= OPT_PUSH;
        }
        if self.interleave {
            opts |= OPT_INTERLEAVE;
        }
        if self.hnd {
            opts |= OPT_HND;
        }
        opts | ((self.ahead as i32) << OPT_AHEAD_SHIFT)
    }

    /// The kernel of a `bf16` / `f16` call: two units per step (`pair`) is its own bf16
    /// kernel (`_pair_`, ~10 more registers); f16 has none and takes the one-unit kernel. The
    /// dynamic order is its own kernels too (`_dyn_`: the static-order ones keep their code).
    pub fn kernel(&self, sfx: &str) -> String {
        if self.half_dims {
            let qs_cl = if self.merge.clustered() { "qs_cl_" } else { "" };
            return format!("qsa_attn_dec_hd_{qs_cl}fwd_{sfx}");
        }
        let pair = if self.pair && sfx == "bf16" {
            "pair_"
        } else {
            ""
        };
        let dyn_ = if self.dynamic { "dyn_" } else { "" };
        if self.bulk {
            let cl = if self.merge.clustered() { "cl_" } else { "" };
            format!("qsa_attn_dec_bk_{cl}fwd_{sfx}")
        } else if self.merge == DecMerge::Lean {
            let qs = if self.q_cta { "qs_" } else { "" };
            format!("qsa_attn_dec_lean_{qs}cl_fwd_{sfx}")
        } else if self.q_cta {
            let cl = if self.merge.clustered() { "cl_" } else { "" };
            format!("qsa_attn_dec_qs_{cl}fwd_{sfx}")
        } else if self.merge == DecMerge::Flat {
            format!("qsa_attn_dec_flat_cl_fwd_{sfx}")
        } else if self.merge.clustered() {
            format!("qsa_attn_dec_{dyn_}cl_fwd_{pair}{sfx}")
        } else {
            format!("qsa_attn_dec_{dyn_}fwd_{pair}{sfx}")
        }
    }
}

/// CTAs of one cluster of the cluster-merge kernel (DEC_CLUSTER): its splits per item.
pub const DEC_CLUSTER: usize = 8;
/// Floats of one warp's merge area (DEC_MERGE_FLOATS) and of the cluster kernel's CTA result.
const MERGE_FLOATS: usize = 2 * DEC_ROWS + DEC_ROWS * 128;
const CTA_RESULT_FLOATS: usize = DEC_ROWS * 128 + DEC_ROWS;
/// Floats of the push merge's inbox (DEC_INBOX_FLOATS): DEC_CLUSTER senders x 2 rows, o and lse.
const INBOX_FLOATS: usize = DEC_ROWS * 128 + DEC_ROWS;

/// The decode kernel's launch plan for one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodePlan {
    /// Work items (grid.x): batch x q_len x hkv x ceil(group / 16).
    pub items: usize,
    /// CTAs per work item (grid.y).
    pub nsplit: usize,
    /// Warps per CTA (block = 32 x warps).
    pub warps: usize,
    /// cp.async ring stages per warp.
    pub stages: usize,
    /// Two units (32 keys) per softmax step: bf16's `_pair_` kernel (f16 takes the one-unit one).
    pub pair: bool,
    pub merge: DecMerge,
    /// The K/V copies ask L2 for whole 256-byte rows (QSA_ATTN_DEC_PREFETCH=256).
    pub l2_256: bool,
    /// A warp takes every warps-th unit of its split (QSA_ATTN_DEC_ORDER=interleave).
    pub interleave: bool,
    /// Warps claim their units past the ring's first fill from a CTA counter, so warps whose
    /// copies come back late take fewer (QSA_ATTN_DEC_ORDER=dynamic): the `_dyn_` kernels.
    pub dynamic: bool,
    /// Units prefetched into L2 beyond the ring (QSA_ATTN_DEC_AHEAD, 0-7).
    pub ahead: usize,
    /// A development ablation (QSA_ATTN_DEC_PROBE): the launch runs, its output is not the
    /// attention. None in every plan the dispatch makes by itself.
    pub probe: Option<DecProbe>,
    /// q staged once per CTA in shared memory, read by ldmatrix after the ring's first copies
    /// (QSA_ATTN_DEC_QLOAD=cta): the `_qs_` kernels. Otherwise each warp loads q's fragments
    /// with 32 four-byte loads per lane before the ids.
    pub q_cta: bool,
    /// K/V rows fetched by cp.async.bulk into mbarrier-completed stages (QSA_ATTN_DEC_COPY=bulk,
    /// sm_90a): the `_bk_` kernels. Otherwise each lane's 16-byte cp.async.
    pub bulk: bool,
    /// O's head dimension split over warp pairs, both warps of a pair streaming the same units
    /// (QSA_ATTN_DEC_DIMS=half): the `_hd_` kernels.
    pub half_dims: bool,
    /// Dynamic shared bytes: warps x stages x DEC_STAGE_BYTES (or the cluster merge's areas),
    /// plus DEC_Q_BYTES with `q_cta`, plus warps x stages x 8 (mbarriers) with `bulk`.
    pub shared: u32,
    /// K / V are head-major, `[batch, hkv, kv_len, D]` (the call's `kv_layout: hnd`; set by
    /// the launch plan from the call, never by a switch): the kernel's DEC_OPT_HND.
    pub hnd: bool,
}

/// Where the kernel is built: NVIDIA sm_80+ (bf16 mma.sync), the kernel's QSA_DEC_MMA.
pub fn built(caps: &TargetCaps) -> bool {
    caps.vendor == Vendor::Nvidia && caps.has(Feature::Bf16Tc)
}

fn number(sw: &Switches, key: &str, lo: usize, hi: usize) -> Result<Option<usize>, BackendError> {
    let Some(v) = sw.get(key) else {
        return Ok(None);
    };
    match v.parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(BackendError::Input(format!(
            "{key}={}: expected a whole number from {lo} to {hi}",
            crate::echo::value(v)
        ))),
    }
}

/// The decode plan of a forward call, or None where the staged kernel runs: not built here,
/// a backward, t > 32, a prefill-sized grid, or `QSA_ATTN_KERNEL=staged`. `QSA_ATTN_KERNEL=
/// decode` forces it on any shape where it is built (elsewhere the staged kernel runs, as a
/// forced top-k kernel falls back). Sweep switches: QSA_ATTN_DEC_WARPS, QSA_ATTN_DEC_STAGES,
/// QSA_ATTN_DEC_SPLITS, QSA_ATTN_DEC_MERGE (kernel | launch | cluster | push | flat | lean),
/// QSA_ATTN_DEC_PAIR, QSA_ATTN_DEC_PREFETCH (none | 256), QSA_ATTN_DEC_ORDER (contiguous |
/// interleave | dynamic), QSA_ATTN_DEC_AHEAD (0-7 units of L2 look-ahead), QSA_ATTN_DEC_QLOAD
/// (warp | cta: q staged per CTA), QSA_ATTN_DEC_COPY (cp_async | bulk: K/V rows by the TMA,
/// sm_90a), QSA_ATTN_DEC_DIMS (whole | half: O's dims split over warp pairs); the ablation QSA_ATTN_DEC_PROBE
/// (launch | no_kv | no_math | list | loop | cta | cluster: the output is then NOT the attention).
#[allow(clippy::too_many_arguments)]
pub fn decode_plan(
    caps: &TargetCaps,
    sw: &Switches,
    batch: usize,
    q_len: usize,
    hq: usize,
    hkv: usize,
    t: usize,
    backward: bool,
) -> Result<Option<DecodePlan>, BackendError> {
    let forced = match sw.get("QSA_ATTN_KERNEL") {
        Some("decode") => true,
        Some("staged") | Some("gather") => return Ok(None),
        _ => false,
    };
    let group = hq / hkv.max(1);
    let items = batch * q_len * hkv * group.div_ceil(DEC_ROWS);
    let sms = caps.multiprocessors.max(1) as usize;
    if backward || !built(caps) || t > DEC_MAX_T || (!forced && items > MAX_ITEMS_PER_SM * sms) {
        return Ok(None);
    }
    let limit = caps.shared_per_block as usize;
    let warps = number(sw, "QSA_ATTN_DEC_WARPS", 1, 8)?.unwrap_or(DEFAULT_WARPS);
    let fit = (limit / (warps * DEC_STAGE_BYTES)).min(DEC_MAX_STAGES);
    let stages = match number(sw, "QSA_ATTN_DEC_STAGES", 1, DEC_MAX_STAGES)? {
        Some(s) if s > fit => {
            return Err(BackendError::Shape(format!(
                "QSA_ATTN_DEC_STAGES={s} with {warps} warps needs {} bytes of shared memory, {} allows {limit}",
                s * warps * DEC_STAGE_BYTES,
                caps.name
            )))
        }
        Some(s) => s,
        None if fit == 0 => {
            return Err(BackendError::Shape(format!(
                "QSA_ATTN_DEC_WARPS={warps} needs {} bytes of shared memory for one stage, {} allows {limit}",
                warps * DEC_STAGE_BYTES,
                caps.name
            )))
        }
        None => fit.min(DEFAULT_MAX_STAGES),
    };
    // Spread small grids over the multiprocessors; each CTA keeps at least one unit per warp.
    let max_units = UNITS_PER_BLOCK * t;
    let nsplit = match number(sw, "QSA_ATTN_DEC_SPLITS", 1, 65_535)? {
        Some(n) => n,
        None => (sms / items.max(1)).clamp(1, max_units.div_ceil(warps).max(1)),
    };
    let clusters = caps.has(Feature::Clusters);
    let merge = match sw.get("QSA_ATTN_DEC_MERGE") {
        // Forced where there are no clusters, it falls back to the ticket merge (as a forced
        // top-k kernel falls back), so one sweep runs on every target.
        Some("cluster") if clusters => DecMerge::Cluster,
        Some("push") if clusters => DecMerge::Push,
        Some("flat") if clusters => DecMerge::Flat,
        Some("lean") if clusters => DecMerge::Lean,
        Some("cluster") | Some("push") | Some("flat") | Some("lean") => DecMerge::Kernel,
        // Split items on sm_90 merge through a cluster: H200, 2026-12-02 03:47 UTC
        // (/work/wt/results/attndec-2/bench/bench.md), one query x 8 KV heads at 262K: group 16
        // 12.0 us against the ticket merge's 13.6, group 8 10.6 against 12.6.
        // (Not where QSA_ATTN_DEC_SPLITS sets another split count.)
        None if clusters && nsplit > 1 && sw.get("QSA_ATTN_DEC_SPLITS").is_none() => {
            DecMerge::Cluster
        }
        None if nsplit > DEC_MAX_MERGE_SPLITS => DecMerge::Launch,
        None => DecMerge::Kernel,
        Some("kernel") if nsplit > DEC_MAX_MERGE_SPLITS => {
            return Err(BackendError::Shape(format!(
                "QSA_ATTN_DEC_MERGE=kernel merges at most {DEC_MAX_MERGE_SPLITS} splits (its weight \
                 table lies over the smallest ring), {nsplit} asked: fewer splits, or merge=launch"
            )))
        }
        Some("kernel") => DecMerge::Kernel,
        Some("launch") => DecMerge::Launch,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_MERGE={}: expected kernel, launch, cluster, push, flat or lean",
                crate::echo::value(v)
            )))
        }
    };
    if merge.clustered() && nsplit != DEC_CLUSTER && sw.get("QSA_ATTN_DEC_SPLITS").is_some() {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_MERGE={} runs {DEC_CLUSTER} splits per item (the kernel's \
             cluster size), QSA_ATTN_DEC_SPLITS={nsplit} asked: drop it or set {DEC_CLUSTER}",
            sw.get("QSA_ATTN_DEC_MERGE").unwrap_or("cluster")
        )));
    }
    let nsplit = if merge.clustered() {
        DEC_CLUSTER
    } else {
        nsplit
    };
    // A ring deeper than a warp's units only costs resident CTAs (one query: one unit a warp;
    // with O's dims split, a warp pair streams the same units). The split is settled only below
    // (half_dims needs the merge and q load); here the switch or the default counts, which can
    // differ only in depth, never in what the kernel computes.
    let unit_warps = if super::attention_decode_dims::maybe_half(sw)? {
        (warps / 2).max(1)
    } else {
        warps
    };
    let stages = if sw.get("QSA_ATTN_DEC_STAGES").is_some() {
        stages
    } else {
        stages.min(max_units.div_ceil(nsplit).div_ceil(unit_warps).max(1))
    };
    // QSA_ATTN_DEC_PAIR=1: two units per step, which needs two ring stages (off by default:
    // not yet measured).
    let pair = number(sw, "QSA_ATTN_DEC_PAIR", 0, 1)? == Some(1);
    let stages = if pair { stages.max(2) } else { stages };
    if stages > fit.max(1) {
        return Err(BackendError::Shape(format!(
            "QSA_ATTN_DEC_PAIR=1 needs two ring stages: {} bytes of shared memory with {warps} warps, {} allows {limit}",
            warps * stages * DEC_STAGE_BYTES,
            caps.name
        )));
    }
    let probe = match sw.get("QSA_ATTN_DEC_PROBE") {
        None => None,
        Some("launch") => Some(DecProbe::Launch),
        Some("no_kv") => Some(DecProbe::NoKv),
        Some("no_math") => Some(DecProbe::NoMath),
        Some("list") => Some(DecProbe::List),
        Some("loop") => Some(DecProbe::Loop),
        Some("cta") => Some(DecProbe::Cta),
        Some("cluster") => Some(DecProbe::Cluster),
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_PROBE={}: expected launch, no_kv, no_math, list, loop, cta or cluster (a timing \
                 ablation whose output is not the attention; leave it unset for the real kernel)",
                crate::echo::value(v)
            )))
        }
    };
    // QSA_ATTN_DEC_PREFETCH=256: the copies' L2::256B prefetch size (a cache hint: same result).
    let l2_256 = match sw.get("QSA_ATTN_DEC_PREFETCH") {
        None | Some("none") => false,
        Some("256") => true,
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_PREFETCH={}: expected none or 256 (bytes L2 fetches per copy)",
                crate::echo::value(v)
            )))
        }
    };
    let (interleave, dynamic) = match sw.get("QSA_ATTN_DEC_ORDER") {
        None | Some("contiguous") => (false, false),
        Some("interleave") => (true, false),
        Some("dynamic") => (false, true),
        Some(v) => {
            return Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_ORDER={}: expected contiguous, interleave or dynamic (how a CTA's units are dealt to its warps)",
                crate::echo::value(v)
            )))
        }
    };
    let ahead = number(sw, "QSA_ATTN_DEC_AHEAD", 0, MAX_AHEAD)?.unwrap_or(0);
    // The dynamic order's kernels (`_dyn_`) step one unit at a time and prefetch nothing beyond
    // the ring: a warp does not know its later units before it claims them.
    if dynamic && (pair || ahead > 0) {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_ORDER=dynamic claims one unit at a time: it has no {} (drop that switch or the order)",
            if pair {
                "QSA_ATTN_DEC_PAIR=1 kernel"
            } else {
                "L2 look-ahead (QSA_ATTN_DEC_AHEAD)"
            }
        )));
    }
    // The flat merge's kernels (`_flat_cl_`) are the one-unit, static-order loop only: asked
    // for, the others are refused; as a default (a flip the card would decide), they keep the pull merge.
    let merge =
        if merge == DecMerge::Flat && (pair || dynamic) && sw.get("QSA_ATTN_DEC_MERGE").is_none() {
            DecMerge::Cluster
        } else {
            merge
        };
    if matches!(merge, DecMerge::Flat | DecMerge::Lean) && (pair || dynamic) {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_MERGE={} has no {} kernel (drop that switch or the merge)",
            if merge == DecMerge::Flat {
                "flat"
            } else {
                "lean"
            },
            if pair {
                "QSA_ATTN_DEC_PAIR=1"
            } else {
                "QSA_ATTN_DEC_ORDER=dynamic"
            }
        )));
    }
    let q_cta = q_cta(sw, merge, pair, dynamic)?;
    // The merge probes stop between the cluster merge's levels: only the cluster kernels have
    // them (the others keep their code).
    if matches!(probe, Some(DecProbe::Cta | DecProbe::Cluster)) && !merge.clustered() {
        return Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_PROBE={} splits the cluster merge's levels: this plan merges by {merge:?} \
             (sm_90's one-query plan, or QSA_ATTN_DEC_MERGE=cluster|push|flat|lean)",
            sw.get("QSA_ATTN_DEC_PROBE").unwrap_or_default()
        )));
    }
    let bulk = super::attention_decode_copy::bulk(caps, sw, merge, pair, dynamic, q_cta)?;
    let half_dims =
        super::attention_decode_dims::half_dims(sw, warps, merge, pair, dynamic, q_cta, bulk)?;
    let ring = warps * stages * DEC_STAGE_BYTES;
    let shared = match merge {
        // The CTA's own (o, lse) lies after the warps' merge areas (over the ring: written
        // once every warp is out of it).
        DecMerge::Cluster => ((warps * MERGE_FLOATS + CTA_RESULT_FLOATS) * 4).max(ring),
        // The inbox lies past both the ring and the merge areas: pushes land while the
        // owner may still run its loop.
        DecMerge::Push => (warps * MERGE_FLOATS * 4).max(ring) + INBOX_FLOATS * 4,
        // The lean merge: each warp's area over its own ring, the inbox past the ring (pushes
        // land while the owner may still run its loop).
        DecMerge::Lean => ring + INBOX_FLOATS * 4,
        // Each warp's merge area lies over its own ring's first stage (MERGE_FLOATS x 4 <=
        // DEC_STAGE_BYTES): the ring is all.
        _ => ring,
    };
    // q's tile lies past all of it (the kernel's dec_fwd<QS> computes the same offset).
    let shared = if q_cta { shared + DEC_Q_BYTES } else { shared };
    // The mbarriers too (the kernel's dec_fwd<BULK> computes the same offset).
    let shared = if bulk {
        shared + warps * stages * super::attention_decode_copy::MBAR_BYTES
    } else {
        shared
    };
    if shared > limit {
        return Err(BackendError::Shape(format!(
            "the {merge:?} merge with {warps} warps x {stages} stages needs {shared} bytes of shared \
             memory, {} allows {limit}",
            caps.name
        )));
    }
    Ok(Some(DecodePlan {
        items,
        nsplit,
        warps,
        stages,
        pair,
        merge,
        l2_256,
        interleave,
        dynamic,
        ahead,
        probe,
        q_cta,
        bulk,
        half_dims,
        shared: shared as u32,
        hnd: false,
    }))
}

/// QSA_ATTN_DEC_QLOAD: `cta` stages q once per CTA in shared memory (the `_qs_` kernels),
/// `warp` keeps each warp's own loads. The `_qs_` kernels are the one-unit, static-order loop with
/// the ticket, launch or pull cluster merge: asked for with another form, refused; as a default
/// (DEFAULT_Q_CTA_*), those forms keep the warps' loads.
fn q_cta(sw: &Switches, merge: DecMerge, pair: bool, dynamic: bool) -> Result<bool, BackendError> {
    let other = if pair {
        Some("QSA_ATTN_DEC_PAIR=1")
    } else if dynamic {
        Some("QSA_ATTN_DEC_ORDER=dynamic")
    } else if merge == DecMerge::Push {
        Some("QSA_ATTN_DEC_MERGE=push")
    } else if merge == DecMerge::Flat {
        Some("QSA_ATTN_DEC_MERGE=flat")
    } else if sw.get("QSA_ATTN_DEC_COPY") == Some("bulk") {
        // The `_bk_` kernels load q per warp: the staged-q default gives way to an asked copy form.
        Some("QSA_ATTN_DEC_COPY=bulk")
    } else {
        None
    };
    match sw.get("QSA_ATTN_DEC_QLOAD") {
        None if merge == DecMerge::Cluster => Ok(DEFAULT_Q_CTA_CLUSTER && other.is_none()),
        None => Ok(DEFAULT_Q_CTA_PER_ITEM && other.is_none()),
        Some("warp") => Ok(false),
        Some("cta") => match other {
            None => Ok(true),
            Some(o) => Err(BackendError::Input(format!(
                "QSA_ATTN_DEC_QLOAD=cta has no {o} kernel (drop that switch or the q load)"
            ))),
        },
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_DEC_QLOAD={}: expected warp or cta (where q's fragments are loaded from)",
            crate::echo::value(v)
        ))),
    }
}

/// The dispatch name of a decode forward: `decode`, or `decode_split` (in-kernel merge) /
/// `decode_combine` (a second launch) when the items are split.
pub fn dispatch_name(plan: &DecodePlan) -> &'static str {
    match (plan.nsplit > 1, plan.merge) {
        (false, _) => "decode",
        (true, DecMerge::Kernel) => "decode_split",
        (true, DecMerge::Launch) => "decode_combine",
        (_, DecMerge::Cluster) => "decode_cluster",
        (_, DecMerge::Push) => "decode_push",
        (_, DecMerge::Flat) => "decode_flat",
        (_, DecMerge::Lean) => "decode_lean",
    }
}

#[cfg(test)]
#[path = "attention_decode_tests.rs"]
mod tests;

//! Selection-attention dispatch: the staged kernel (shared-memory / LDS staging, sized from
//! the target's limit) unless the straightforward gather kernel is forced; and the staged
//! kernel's launch plan (rows per CTA, staging depth, decode splits). Pure functions, so the
//! dispatch snapshot of every target is computed on any machine; bench/attention_vs_torch.py
//! takes them, through `qsa plan`, for the cupy runs on the H200.

use super::{Feature, Switches, TargetCaps, Vendor};
use crate::backend::BackendError;
use crate::problem::AttnDtype;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnKernel {
    /// Straightforward gather from global memory: the error baseline.
    Gather,
    /// K/V blocks staged once in shared memory / LDS for every head of the GQA group.
    Staged,
}

impl AttnKernel {
    pub fn name(self) -> &'static str {
        match self {
            AttnKernel::Gather => "gather",
            AttnKernel::Staged => "staged",
        }
    }
}

pub fn choose(_caps: &TargetCaps, sw: &Switches) -> AttnKernel {
    match sw.get("QSA_ATTN_KERNEL") {
        Some("gather") => AttnKernel::Gather,
        _ => AttnKernel::Staged,
    }
}

/// How the staged backward gets dK and dV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwdPath {
    /// The query-side kernel adds each CTA's dK / dV to global memory with one float atomic
    /// per element and selected block (every target).
    Atomic,
    /// The query-side kernel computes dQ (and D = rowsum(dO O)) only; `qsa_attn_kv_bwd_*`, one
    /// CTA per (batch, KV head, KV block), gathers the block's query tokens itself and writes
    /// its dK / dV once: no atomics, no zero-fill (NVIDIA tensor cores only).
    KvMajor,
    /// No query-side pass: `qsa_attn_bwd_delta` writes D = rowsum(dO O), then
    /// `qsa_attn_kv_dq_bwd_*` (the KV-block-major kernel) also adds dQ into the zero-filled dq
    /// with one f32 atomic per element and selected block (NVIDIA tensor cores only).
    KvFused,
}

impl BwdPath {
    /// The dispatch name of a staged backward call.
    pub fn name(self) -> &'static str {
        match self {
            BwdPath::Atomic => "staged",
            BwdPath::KvMajor => "staged_kv",
            BwdPath::KvFused => "staged_kv_dq",
        }
    }

    /// The name the dispatch table and the results carry: the path, and on the KV-block-major
    /// paths the products' kernel stem after a `+` (`staged_kv_dq+kvwg2a3`), since the
    /// products change with the shape (`kv_products`'s wgmma default) and a reviewer reads the
    /// kernel that runs from the dispatch snapshot's diff.
    /// With query ranges (`qchunk`, the wgmma forms' `kv_qchunk`) `/q` and the range's tokens
    /// follow (`staged_kv_dq+kvwg2a3/q2048`).
    pub fn dispatch_name(self, products: KvProducts, qchunk: Option<usize>) -> String {
        let ranges = qchunk.map_or(String::new(), |n| format!("/q{n}"));
        match self {
            BwdPath::Atomic => self.name().into(),
            BwdPath::KvMajor | BwdPath::KvFused => {
                format!("{}+{}{ranges}", self.name(), products.stem())
            }
        }
    }
}

// The forward's kernel choice (staged or ring) and the ring's plan: attention_ring.rs.
pub use super::attention_ring::{
    choose_forward, ring_shared_bytes, FwdPath, RingOrder, RING_DEFAULT_LAZY, RING_DEFAULT_ORDER,
    RING_DEFAULT_Q_SHARED, RING_DEFAULT_SWIZZLE, RING_DEFAULT_WARP_COPY, RING_MAX_STAGES,
    RING_STAGES,
};

/// Threads of a `qsa_attn_kv_bwd_*` CTA (KVB_THREADS in the kernel).
pub const KV_BWD_THREADS: u32 = 256;

/// Dynamic shared bytes of a `qsa_attn_kv_bwd_*` CTA (`kv_smem` in the kernel): the staged K
/// and V block; two buffers (the tile being computed, the next one being copied) of q rows
/// (16-bit, KV_STRIDE), dO rows (f32) and three per-row values; P and dP rows; the chunk's
/// token list (KVB_CHUNK = KV_BWD_THREADS) and the per-wave counts of its compaction; then
/// for the split kernels (`qsa_attn_kv16s_*`) dO's three bf16 parts (16-bit rows, KV_STRIDE),
/// then for the fused bf16 ones (`qsa_attn_kv16{,s}_dq_*`, `fused`) dS's bf16 hi and lo rows
/// (KV16_DS_STRIDE).
pub fn kv_bwd_shared_bytes(kv: KvProducts, fused: bool) -> usize {
    if kv.wg > 0 {
        return super::attention_kv::kv_wg_shared(kv.wg);
    }
    let threads = KV_BWD_THREADS as usize;
    let parts = if kv.split {
        3 * STAGED_ROWS * KV_STRIDE * 2
    } else {
        0
    };
    let ds = if kv.bf16 && fused {
        2 * STAGED_ROWS * KV16_DS_STRIDE * 2
    } else {
        0
    };
    // The conflict-free form's P / dP rows: KVC_S_STRIDE (76 floats) in attention_kv_bwd.h.
    let s_stride = if kv.nc { KVC_S_STRIDE } else { S_STRIDE };
    2 * BLOCK * KV_STRIDE * 2
        + 2 * (STAGED_ROWS * KV_STRIDE * 2 + STAGED_ROWS * Q_STRIDE * 4 + 3 * STAGED_ROWS * 4)
        + 2 * STAGED_ROWS * s_stride * 4
        + (threads + threads / 32) * 4
        + parts
        + ds
}

/// dS rows of the fused bf16 kernel: KV16_DS_STRIDE (u16) in kernels/common/attention_kv_bwd16.h.
const KV16_DS_STRIDE: usize = BLOCK + 8;
/// P / dP rows of the conflict-free form (`QSA_ATTN_KV_LAYOUT=nc`): KVC_S_STRIDE (floats).
const KVC_S_STRIDE: usize = 76;

/// The largest of the KV-block-major kernels' shared bytes (where none fits, none is taken).
pub fn kv_bwd_shared_max() -> usize {
    let nc = KvProducts {
        nc: true,
        ..KvProducts::KV16S
    };
    kv_bwd_shared_bytes(nc, true)
}

/// Where the bf16-product KV-block-major kernels (`qsa_attn_kv16*`) exist and apply: bf16
/// inputs on sm_90+ (`Feature::Clusters` marks sm_90+, as for the ring's swizzled kernel).
pub(crate) fn kv16_applies(caps: &TargetCaps, dtype: AttnDtype) -> bool {
    dtype == AttnDtype::Bf16 && caps.has(Feature::Clusters)
}

/// What the backward's default depends on besides the target: how many query lists select
/// each KV block on average. The KV-block-major kernel runs one CTA per (batch, KV head, KV
/// block), each scanning the query tokens that may select its block: it pays off when blocks
/// are shared by many queries (prefill) and loses where most blocks are selected by none
/// (decode). Measured on the H200 (call F1 of session 8, 2026-12-02, the runner's golden bench
/// against session 7's medians of the atomic path): attn_decode_16q (16 x 16 selections over
/// 4,096 blocks, 0.06 per block) 978.8 us fused vs 691.8 atomic, attn_decode_1q (0.004 per
/// block) 492.3 vs 405.3; the prefill case (1,024 per block) 68.8 ms vs 158.5. Nothing was
/// measured between 0.06 and 1,024: the line sits at one selection per block.
#[derive(Clone, Copy, Debug)]
pub struct BwdShape {
    pub q_len: usize,
    pub kv_len: usize,
    pub t: usize,
}

impl BwdShape {
    /// At least one list entry per KV block on average (`q_len * t >= ceil(kv_len / 64)`).
    pub fn blocks_are_shared(self) -> bool {
        self.q_len * self.t >= self.kv_len.div_ceil(BLOCK)
    }
}

/// The staged backward's dK / dV path. Default: the fused KV-block-major kernel with bf16
/// products and dO split once per tile (`kvdq` with `bf16s`, `qsa_attn_kv16s_dq_bwd_bf16`)
/// where it applies (bf16 inputs, sm_90+, its shared memory fits): on the H200 (call A1,
/// 2026-12-02, bench/attention_vs_torch.py, prefill B=4 T=16K 64/4 heads 16 blocks) 68.2 ms
/// against the atomic path's 158.5 (kvdq tf32 137.3, kvdq bf16 73.4; fla 48.93), and the
/// runner's error suite passed every kv16 case on the card (dv 1.02e-5 at most, gate 5e-5).
/// Only where KV blocks are shared (`BwdShape::blocks_are_shared`: decode shapes measured
/// slower fused). Elsewhere (f16 inputs, before sm_90, AMD, decode shapes) the atomics stay: the tf32 KV-block-major kernels
/// are forced only (`QSA_ATTN_BWD=kv|kvdq`; where not built they fall back to the atomics).
pub fn choose_backward(
    caps: &TargetCaps,
    sw: &Switches,
    dtype: AttnDtype,
    shape: BwdShape,
) -> Result<BwdPath, BackendError> {
    let kv_fits = caps.vendor == Vendor::Nvidia
        && caps.has(Feature::Bf16Tc)
        && kv_bwd_shared_max() <= caps.shared_per_block as usize;
    match sw.get("QSA_ATTN_BWD") {
        None if kv_fits && kv16_applies(caps, dtype) && shape.blocks_are_shared() => {
            Ok(BwdPath::KvFused)
        }
        None => Ok(BwdPath::Atomic),
        Some("atomic") => Ok(BwdPath::Atomic),
        // Forced where it is not built, it falls back to the atomics (as a forced top-k kernel
        // does), so a matrix variant forcing it runs on every target.
        Some("kv") => Ok(if kv_fits {
            BwdPath::KvMajor
        } else {
            BwdPath::Atomic
        }),
        Some("kvdq") => Ok(if kv_fits {
            BwdPath::KvFused
        } else {
            BwdPath::Atomic
        }),
        Some(v) => Err(BackendError::Input(format!(
            "QSA_ATTN_BWD={}: expected atomic, kv or kvdq",
            crate::echo::value(v)
        ))),
    }
}

// The KV-block-major kernel's products (`KvProducts`, `kv_products`) and the split kernel's
// sweep forms: attention_kv.rs.
pub use super::attention_kv::{
    kv_products, kv_wg_shared, kv_wg_threads, wg_geometry, KvProducts, KV_WG_THREADS,
};

/// Rows (query heads x query tokens) of one staged CTA: ATT_ROWS in the kernel.
pub const STAGED_ROWS: usize = 16;
/// Threads of a staged CTA (ATT_THREADS); the gather kernels run 256.
pub const STAGED_THREADS: u32 = 128;
pub const GATHER_THREADS: u32 = 256;
/// Shared-memory strides of the kernel (Q_STRIDE, S_STRIDE floats; KV_STRIDE u16).
const Q_STRIDE: usize = 132;
const S_STRIDE: usize = 68;
pub(crate) const KV_STRIDE: usize = 136;
pub(crate) const BLOCK: usize = crate::problem::ATTN_BLOCK;
/// Decode splits aim at this many CTAs per multiprocessor: four resident staged CTAs per SM
/// on the H200, and with tensor cores a block costs mostly its copy latency, so filling every
/// slot wins (.devrun/attention2/run1: 16 q x 8 kv heads at 262K, 41 us at four per SM
/// against 45 us at the old two).
const SPLIT_CTAS_PER_SM: usize = 4;
/// Each split keeps at least this many blocks (one query, 16 blocks: 16 splits of one block
/// ran fastest on the H200, .devrun/attention2/run1).
const SPLIT_MIN_BLOCKS: usize = 1;

/// The staged kernel's launch plan for one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedPlan {
    /// Query heads per CTA (a divisor of the group, at most STAGED_ROWS).
    pub hc: usize,
    /// Query tokens per CTA: their selections are merged, each block loaded once.
    pub qt: usize,
    /// Staged K/V buffers: 2 = double buffering.
    pub nbuf: usize,
    /// Work items (grid.x): batch x token tiles x kv heads x head chunks.
    pub items: usize,
    /// CTAs per work item (grid.y); > 1 writes partials merged by qsa_attn_combine.
    pub nsplit: usize,
    /// Dynamic shared bytes.
    pub shared: u32,
}

/// Heads per CTA (largest divisor of `group` <= STAGED_ROWS) and tokens per CTA.
pub fn staged_geometry(group: usize, q_len: usize) -> (usize, usize) {
    let hc = (1..=group.min(STAGED_ROWS))
        .rev()
        .find(|d| group.is_multiple_of(*d))
        .unwrap_or(1);
    let qt = (STAGED_ROWS / hc).min(q_len).max(1);
    (hc, qt)
}

/// Dynamic shared bytes of a staged CTA; the layout is `staged_smem` in the kernel.
pub fn staged_shared_bytes(cap: usize, nbuf: usize, backward: bool) -> usize {
    let rows = if backward { 2 } else { 1 };
    let b = rows * (STAGED_ROWS * Q_STRIDE * 4 + STAGED_ROWS * S_STRIDE * 4)
        + 3 * STAGED_ROWS * 4
        + (4 * cap + 1) * 4;
    b.div_ceil(16) * 16 + nbuf * 2 * BLOCK * KV_STRIDE * 2
}

/// Plan the staged kernel for `batch x q_len` tokens, `hq / hkv` heads, `t` ids per list, on
/// `caps`. Double buffering is taken where it costs no resident CTAs (shared memory per
/// multiprocessor approximated by the per-block limit, which is within 1 KiB on every target
/// of matrix.yaml): on the H200 single buffering at 4 CTAs / SM ran prefill 1.4x faster than
/// double buffering at 2 CTAs / SM (.devrun/attention, first run). Decode shapes whose grid
/// is under SPLIT_CTAS_PER_SM CTAs per multiprocessor split each list over several CTAs.
pub fn staged_plan(
    caps: &TargetCaps,
    batch: usize,
    q_len: usize,
    hq: usize,
    hkv: usize,
    t: usize,
    backward: bool,
) -> Result<StagedPlan, BackendError> {
    let group = hq / hkv;
    let (hc, qt) = staged_geometry(group, q_len);
    let cap = qt * t;
    let limit = caps.shared_per_block as usize;
    let one = staged_shared_bytes(cap, 1, backward);
    if one > limit {
        let per_id = 4 * 4 * qt;
        let fixed = staged_shared_bytes(0, 1, backward);
        let max_t = limit.saturating_sub(fixed) / per_id;
        return Err(BackendError::Shape(format!(
            "staged selection attention needs {one} bytes of shared memory for t = {t} ids per list \
             ({qt} tokens per CTA) but {} allows {limit}: at most t = {max_t} here, or force \
             QSA_ATTN_KERNEL=gather",
            caps.name
        )));
    }
    let two = staged_shared_bytes(cap, 2, backward);
    let nbuf = if limit / two >= limit / one { 2 } else { 1 };
    let items = batch * q_len.div_ceil(qt) * hkv * (group / hc);
    let target = SPLIT_CTAS_PER_SM * caps.multiprocessors.max(1) as usize;
    let nsplit = if backward || items >= target {
        1
    } else {
        let want = target
            .div_ceil(items)
            .min((cap / SPLIT_MIN_BLOCKS).max(1))
            .max(1);
        // Even shares: the kernel gives each split ceil(count / nsplit) blocks, so e.g. 5
        // splits of 16 blocks would run as 4 x 4 plus an empty CTA (and a longer merge).
        cap.div_ceil(cap.div_ceil(want))
    };
    let shared = if nbuf == 2 { two } else { one };
    Ok(StagedPlan {
        hc,
        qt,
        nbuf,
        items,
        nsplit,
        shared: shared as u32,
    })
}

/// `staged_plan` with qsa's sweep switches applied (for experiments on the card, e.g.
/// bench/attention_vs_torch.py): `QSA_ATTN_NBUF` (1 or 2 staged K/V buffers) and
/// `QSA_ATTN_SPLITS` (CTAs per work item, forward only). Unset, the plan is `staged_plan`'s.
#[allow(clippy::too_many_arguments)]
pub fn staged_plan_for(
    caps: &TargetCaps,
    sw: &Switches,
    batch: usize,
    q_len: usize,
    hq: usize,
    hkv: usize,
    t: usize,
    backward: bool,
) -> Result<StagedPlan, BackendError> {
    let mut plan = staged_plan(caps, batch, q_len, hq, hkv, t, backward)?;
    let number = |key: &str, max: usize| -> Result<Option<usize>, BackendError> {
        let Some(v) = sw.get(key) else {
            return Ok(None);
        };
        match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(Some(n)),
            _ => Err(BackendError::Input(format!(
                "{key}={}: expected a whole number from 1 to {max}",
                crate::echo::value(v)
            ))),
        }
    };
    if let Some(nbuf) = number("QSA_ATTN_NBUF", 2)? {
        let shared = staged_shared_bytes(plan.qt * t, nbuf, backward);
        if shared > caps.shared_per_block as usize {
            return Err(BackendError::Shape(format!(
                "QSA_ATTN_NBUF={nbuf} needs {shared} bytes of shared memory, {} allows {}",
                caps.name, caps.shared_per_block
            )));
        }
        plan.nbuf = nbuf;
        plan.shared = shared as u32;
    }
    if let Some(nsplit) = number("QSA_ATTN_SPLITS", 65_535)? {
        if !backward {
            plan.nsplit = nsplit;
        }
    }
    Ok(plan)
}

#[cfg(test)]
#[path = "attention_tests.rs"]
pub(crate) mod tests;
